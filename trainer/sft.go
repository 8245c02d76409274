package trainer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"

	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/chat"
	"github.com/umad-dev/umad/data"
	"github.com/umad-dev/umad/debate"
	"github.com/umad-dev/umad/trainspec"
)

// Tokenizer is what the trainer needs of a model's tokenizer: llama.cpp's, so that
// training sees exactly the ids sampling does (engine.Model and engine.Server implement it).
type Tokenizer interface {
	Tokenize(text string, addSpecial, parseSpecial bool) ([]int32, error)
}

// Pair is one supervised example in token ids: the rendered prompt and the response,
// its end-of-turn token included (the token that stops sampling is trained too).
type Pair struct {
	Prompt, Response []int32
}

// TextPair is one line of a pairs JSONL file: a user message and the response to it.
type TextPair struct {
	Prompt   string `json:"prompt"`
	Response string `json:"response"`
}

// AnswerResponse is the response the synthetic warm start teaches: the answer format the
// graders read.
func AnswerResponse(gold string) string { return "The answer is \\boxed{" + gold + "}." }

// SyntheticPairs asks each problem's turn-0 message and answers it in the boxed format.
func SyntheticPairs(problems []data.Problem) []TextPair {
	out := make([]TextPair, len(problems))
	for i, p := range problems {
		out[i] = TextPair{Prompt: debate.Turn0Message(p.Question), Response: AnswerResponse(p.Gold)}
	}
	return out
}

// ExpertPairs is the warm start of the expert of kind ops[expert] on synthetic experts
// problems (data.TaskExperts): the turn-0 message of each problem of its own kind, answered
// with its worked result, and, for every problem, the turn-1 debate message showing each
// expert's claim (the expert of the problem's kind right, the others applying their own
// operator), answered by taking one of those claims. Which claim is taken is a coin flip
// from (seed, problem), blind to which claim is right: the pairs teach the agent to read a
// peer's result and to keep or take one, and leave when to trust a peer to the RL
// algorithm. prompt builds the turn-1 messages as the debate will (masked or not).
func ExpertPairs(problems []data.Problem, ops string, expert int, prompt debate.Prompt, seed uint64) ([]TextPair, error) {
	if expert < 0 || expert >= len(ops) {
		return nil, fmt.Errorf("expert %d: the experts task with operators %q has experts 0 to %d", expert, ops, len(ops)-1)
	}
	var own, review []TextPair
	for i, p := range problems {
		claims, err := data.ExpertClaims(p, ops)
		if err != nil {
			return nil, err
		}
		if p.Subject == data.KindName(ops[expert]) {
			own = append(own, TextPair{Prompt: debate.Turn0Message(p.Question), Response: claims[expert].WorkedResponse()})
		}
		shown := make([]string, len(claims))
		for j, c := range claims {
			shown[j] = c.WorkedResponse()
		}
		id := debate.TrajectoryID{Problem: uint64(i)}
		msg, err := prompt.Message(p.Question, [][]string{shown}, id)
		if err != nil {
			return nil, err
		}
		taken := rand.New(rand.NewPCG(seed, uint64(i))).IntN(len(claims))
		label := prompt.Labels(id, 1, len(claims))[taken]
		review = append(review, TextPair{Prompt: msg, Response: AgreeResponse(label, claims[taken])})
	}
	if len(own) == 0 {
		return nil, fmt.Errorf("expert %d: none of the %d problems is a %s", expert, len(problems), data.KindName(ops[expert]))
	}
	return append(own, review...), nil
}

// AgreeResponse is the turn-1 response of the experts warm start: which agent's claim it
// takes, by the label the debate message gives that agent, then the claim. The first
// token after "agent" is the whole decision, so RL can learn it as one choice.
func AgreeResponse(label int, c data.Claim) string {
	return fmt.Sprintf("I agree with agent %d: %s", label, c.WorkedResponse())
}

// ReadPairs reads a JSONL file of {"prompt": ..., "response": ...} lines; a line without
// both is an error naming it.
func ReadPairs(path string) ([]TextPair, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read pairs: %w", err)
	}
	defer f.Close()
	var out []TextPair
	err = data.ReadLines(f, func(n int, line []byte) error {
		var p TextPair
		if err := json.Unmarshal(line, &p); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		if p.Prompt == "" || p.Response == "" {
			return fmt.Errorf("line %d: prompt and response must both be non-empty", n)
		}
		out = append(out, p)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read pairs %s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("read pairs %s: no pairs", path)
	}
	return out, nil
}

// TokenizePairs renders every prompt with the chat format and appends the end-of-turn
// token to every response.
func TokenizePairs(tok Tokenizer, f chat.Format, endOfTurn int32, pairs []TextPair) ([]Pair, error) {
	out := make([]Pair, len(pairs))
	for i, p := range pairs {
		prompt, err := debate.UserPrompt(f, p.Prompt, func(text string) ([]int32, error) { return tok.Tokenize(text, false, true) })
		if err != nil {
			return nil, fmt.Errorf("pair %d: %w", i, err)
		}
		resp, err := tok.Tokenize(p.Response, false, false)
		if err != nil {
			return nil, fmt.Errorf("pair %d: tokenize response: %w", i, err)
		}
		out[i] = Pair{Prompt: prompt, Response: append(resp, endOfTurn)}
	}
	return out, nil
}

// SFTConfig configures a supervised warm start.
type SFTConfig struct {
	Epochs    int
	BatchSize int // pairs per optimizer step
	Opt       trainspec.AdamW
	Seed      uint64 // shuffles the pairs, per epoch
	// Progress, if set, is called after every optimizer step.
	Progress func(step, total int, loss float64)
	// Ctx, if set, stops the run between steps when it is done (ErrInterrupted).
	Ctx context.Context
}

// SFTStats summarise a warm start.
type SFTStats struct {
	Steps               int
	FirstLoss, LastLoss float64 // mean loss of the first and of the last epoch
	Skipped             int64   // optimizer steps skipped for a non-finite gradient norm
}

// SFT trains m on the pairs with token-mean cross-entropy, each mini-batch one optimizer
// step. A non-finite loss stops it with an error.
func SFT(m *torch.Model, pairs []Pair, cfg SFTConfig) (SFTStats, error) {
	var st SFTStats
	if len(pairs) == 0 {
		return st, errors.New("sft: no pairs")
	}
	if cfg.Epochs < 1 || cfg.BatchSize < 1 {
		return st, fmt.Errorf("sft: epochs (%d) and batch size (%d) must be at least 1", cfg.Epochs, cfg.BatchSize)
	}
	perEpoch := (len(pairs) + cfg.BatchSize - 1) / cfg.BatchSize
	total := perEpoch * cfg.Epochs
	for epoch := 0; epoch < cfg.Epochs; epoch++ {
		order := rand.New(rand.NewPCG(cfg.Seed, uint64(epoch))).Perm(len(pairs))
		var epochLoss float64
		for b := 0; b < perEpoch; b++ {
			idx := order[b*cfg.BatchSize : min((b+1)*cfg.BatchSize, len(pairs))]
			if cfg.Ctx != nil && cfg.Ctx.Err() != nil {
				return st, ErrInterrupted
			}
			prompts, responses := batchOf(pairs, idx)
			loss, err := m.SFTLoss(prompts, responses, true, 1)
			if err != nil {
				return st, fmt.Errorf("sft step %d: %w", st.Steps+1, err)
			}
			if math.IsNaN(loss) || math.IsInf(loss, 0) {
				return st, fmt.Errorf("sft step %d: loss is %v (lower the learning rate?)", st.Steps+1, loss)
			}
			s, err := m.Step(cfg.Opt)
			if err != nil {
				return st, fmt.Errorf("sft step %d: %w", st.Steps+1, err)
			}
			st.Steps++
			st.Skipped = s.SkippedTotal
			epochLoss += loss / float64(perEpoch)
			if cfg.Progress != nil {
				cfg.Progress(st.Steps, total, loss)
			}
		}
		if epoch == 0 {
			st.FirstLoss = epochLoss
		}
		st.LastLoss = epochLoss
	}
	// The losses above are those before each step: check the weights the last step left
	// (--lr 1e30 gave finite losses and a model that computes NaN).
	prompts, responses := batchOf(pairs, firstN(min(len(pairs), cfg.BatchSize)))
	loss, err := m.SFTLoss(prompts, responses, false, 1)
	if err != nil {
		return st, fmt.Errorf("sft: loss of the trained weights: %w", err)
	}
	if math.IsNaN(loss) || math.IsInf(loss, 0) {
		return st, fmt.Errorf("sft: the trained weights give a loss of %v (lower the learning rate?)", loss)
	}
	return st, nil
}

// batchOf is the pairs at idx as prompt and response lists.
func batchOf(pairs []Pair, idx []int) (prompts, responses [][]int32) {
	for _, i := range idx {
		prompts, responses = append(prompts, pairs[i].Prompt), append(responses, pairs[i].Response)
	}
	return prompts, responses
}

// firstN is the indexes 0 to n-1.
func firstN(n int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return idx
}
