// Package verifier asks a verifier model, a GGUF run by the engine, about the answer pairs
// robust grading does not decide (grade.Verdict.Decided): --reward robust+verifier=MODEL.gguf.
package verifier

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/umad-dev/umad/chat"
	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/grade"
	"github.com/umad-dev/umad/sampler"
)

// The verifier's generation: greedy, and a few tokens, since its verdict is one letter.
const (
	MaxTokens = 8
	slots     = 8
	// seqContext bounds a prompt: CompassVerifier's is about 590 tokens in
	// Qwen2.5's chat format, a question rarely more than a thousand. A pair whose prompt
	// does not fit is undecided.
	seqContext = 4096
)

// Pair is an answer to judge against the gold answer of its question.
type Pair struct {
	Question, Gold, Answer string
}

// key is what a verdict is cached under: the canonical keys of the two answers.
type key struct{ answer, gold string }

func (p Pair) key() key { return key{grade.Key(p.Answer), grade.Key(p.Gold)} }

// Verifier is a loaded verifier model with the verdicts it gave in this run.
type Verifier struct {
	model    *engine.Model
	engine   *engine.Engine
	format   chat.Format
	template Template
	cache    map[key]grade.Check
}

// Counts are what the verifier did with the pairs it was given.
type Counts struct {
	Pairs     int // pairs given
	Asked     int // prompts the model answered (a cached or repeated pair is asked once)
	Equal     int
	NotEqual  int
	Undecided int // output matching no verdict, or a prompt too long for the context
	Skipped   int // the time budget ran out before they were asked
	Seconds   float64
}

// String is the counts as the commands print them.
func (c Counts) String() string {
	return fmt.Sprintf("%d pairs robust did not decide: %d equal, %d not equal, %d undecided, %d skipped (budget); %d asked in %.1fs",
		c.Pairs, c.Equal, c.NotEqual, c.Undecided, c.Skipped, c.Asked, c.Seconds)
}

// Decided is the number of pairs the model decided, equal or not.
func (c Counts) Decided() int { return c.Equal + c.NotEqual }

// Add sums two counts.
func (c Counts) Add(o Counts) Counts {
	return Counts{c.Pairs + o.Pairs, c.Asked + o.Asked, c.Equal + o.Equal, c.NotEqual + o.NotEqual,
		c.Undecided + o.Undecided, c.Skipped + o.Skipped, c.Seconds + o.Seconds}
}

func (c *Counts) count(v grade.Check) {
	switch v {
	case grade.CheckEqual:
		c.Equal++
	case grade.CheckNotEqual:
		c.NotEqual++
	case grade.CheckSkipped:
		c.Skipped++
	default:
		c.Undecided++
	}
}

// Open loads the verifier model at path, to be asked with template, placed as p says,
// with opt's threads, KV-cache type and flash attention; it fails, before any work, on a file that does not load or
// a model without a known chat template.
func Open(path string, template Template, p engine.Placement, opt engine.Options) (*Verifier, error) {
	m, err := engine.OpenModel(path, p)
	if err != nil {
		return nil, fmt.Errorf("verifier: %w", err)
	}
	f, err := m.Format("")
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("verifier: %w", err)
	}
	opt.Slots, opt.SeqContext = slots, seqContext
	if t := m.TrainedContext(); t > 0 && t < seqContext {
		opt.SeqContext = t
	}
	e, err := m.NewEngine(opt)
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("verifier %s: %w", path, err)
	}
	return &Verifier{model: m, engine: e, format: f, template: template, cache: map[key]grade.Check{}}, nil
}

// Close frees the engine and the model; a nil verifier is a no-op.
func (v *Verifier) Close() {
	if v != nil {
		v.engine.Close()
		v.model.Close()
	}
}

// Check returns the model's verdict on each pair. A pair asked before in this run, or
// twice in pairs, is asked once. With a budget > 0 the model stops when it is spent and
// the pairs not answered by then are skipped (not cached: a later call may ask them).
// Only an interruption of ctx or an engine failure is an error.
func (v *Verifier) Check(ctx context.Context, pairs []Pair, budget time.Duration) ([]grade.Check, Counts, error) {
	start := time.Now()
	c := Counts{Pairs: len(pairs)}
	out := make([]grade.Check, len(pairs))
	keys := make([]key, len(pairs))
	var reqs []engine.Request
	var asked []key // of each request
	seen := map[key]bool{}
	for i, p := range pairs {
		keys[i] = p.key()
		if _, ok := v.cache[keys[i]]; ok || seen[keys[i]] {
			continue
		}
		seen[keys[i]] = true
		prompt, err := v.prompt(p)
		if err != nil {
			return nil, c, err
		}
		reqs = append(reqs, engine.Request{ID: uint64(len(reqs)), Prompt: prompt, K: 1, MaxTokens: MaxTokens,
			Params: sampler.Params{Temperature: 0, TopP: 1}})
		asked = append(asked, keys[i])
	}
	before := len(v.cache)
	if err := v.generate(ctx, reqs, asked, budget); err != nil {
		return nil, c, err
	}
	c.Asked = len(v.cache) - before
	for i, k := range keys {
		out[i] = grade.CheckSkipped
		if verdict, ok := v.cache[k]; ok {
			out[i] = verdict
		}
		c.count(out[i])
	}
	c.Seconds = time.Since(start).Seconds()
	return out, c, nil
}

// prompt renders a pair's question in the model's chat format, with its own default
// system message (as Hugging Face's apply_chat_template does), and tokenizes it.
func (v *Verifier) prompt(p Pair) ([]int32, error) {
	text, err := v.format.Render([]chat.Message{{Role: "user", Content: v.template.Prompt(p)}}, chat.Options{})
	if err != nil {
		return nil, fmt.Errorf("verifier: %w", err)
	}
	return v.model.Tokenize(text, false, true)
}

// generate runs the requests, caching each verdict as it comes, until done or the budget
// is spent.
func (v *Verifier) generate(ctx context.Context, reqs []engine.Request, keys []key, budget time.Duration) error {
	if len(reqs) == 0 {
		return nil
	}
	run := ctx
	if budget > 0 {
		var cancel context.CancelFunc
		run, cancel = context.WithTimeout(ctx, budget)
		defer cancel()
	}
	err := v.engine.Generate(run, reqs, func(r engine.Result) {
		verdict := grade.CheckUndecided // a request the engine refused: a prompt too long
		if r.Err == nil && len(r.Samples) == 1 {
			text, derr := v.model.Detokenize(r.Samples[0].Tokens, false)
			if derr == nil {
				verdict = ParseVerdict(text)
			}
		}
		v.cache[keys[r.Request.ID]] = verdict
	})
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return nil // the budget ran out: the rest are skipped
	}
	return err
}
