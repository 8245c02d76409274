package trainer

import (
	"context"
	"strings"
	"testing"

	"github.com/umad-dev/umad/data"
	"github.com/umad-dev/umad/debate"
	"github.com/umad-dev/umad/internal/torchtest"
	"github.com/umad-dev/umad/trainlog"
)

func TestExpertPairs(t *testing.T) {
	cfg := data.SyntheticConfig{Terms: 2, MaxOperand: 5, Ops: "+*", Task: data.TaskExperts}
	ps, err := data.SyntheticWith(400, 1, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for expert, kind := range []string{"sum", "product"} {
		pairs, err := ExpertPairs(ps, cfg.Ops, expert, debate.Prompt{}, 7)
		if err != nil {
			t.Fatal(err)
		}
		own := 0
		for _, p := range ps {
			if p.Subject == kind {
				own++
			}
		}
		if len(pairs) != own+len(ps) {
			t.Fatalf("expert %d: %d pairs, want %d of its own kind and one debate pair per problem (%d)", expert, len(pairs), own, len(ps))
		}
		for _, p := range pairs[:own] {
			if !strings.HasSuffix(p.Prompt, debate.Turn0Message("")[1:]) || !strings.Contains(p.Prompt, map[string]string{"sum": " + ", "product": " * "}[kind]) {
				t.Fatalf("expert %d: turn-0 pair %q is not a %s", expert, p.Prompt, kind)
			}
		}
		// The debate pairs take agent 0's or agent 1's claim by a coin blind to which is
		// right: about half of them take the right claim, on each kind alike.
		taken := map[string][2]int{} // kind -> {right taken, pairs}
		for i, p := range pairs[own:] {
			problem := ps[i]
			claims, _ := data.ExpertClaims(problem, cfg.Ops)
			if !strings.Contains(p.Prompt, "agent 0 response is: "+strings.Replace(claims[0].WorkedResponse(), `\boxed{`+claims[0].Answer+"}", debate.AnswerMask, 1)) {
				t.Fatalf("debate pair %d: the message does not show agent 0's claim masked: %q", i, p.Prompt)
			}
			var c int
			switch p.Response {
			case AgreeResponse(0, claims[0]):
				c = 0
			case AgreeResponse(1, claims[1]):
				c = 1
			default:
				t.Fatalf("debate pair %d: response %q takes neither claim", i, p.Response)
			}
			n := taken[problem.Subject]
			if claims[c].Answer == problem.Gold {
				n[0]++
			}
			n[1]++
			taken[problem.Subject] = n
		}
		for k, n := range taken {
			if share := float64(n[0]) / float64(n[1]); share < 0.35 || share > 0.65 {
				t.Errorf("expert %d, %ss: the right claim taken in %d of %d pairs; the choice must not follow correctness", expert, k, n[0], n[1])
			}
		}
	}
	// The experts of the same set learn the same debate messages and choices: only the
	// turn-0 pairs differ.
	a, _ := ExpertPairs(ps, cfg.Ops, 0, debate.Prompt{}, 7)
	b, _ := ExpertPairs(ps, cfg.Ops, 1, debate.Prompt{}, 7)
	if a[len(a)-1] != b[len(b)-1] {
		t.Errorf("the experts' last debate pairs differ: %+v vs %+v", a[len(a)-1], b[len(b)-1])
	}
	// Unmasked messages show the boxed answers, as umad debate --no-mask.
	u, err := ExpertPairs(ps[:10], cfg.Ops, 0, debate.Prompt{KeepAnswers: true}, 7)
	if err != nil {
		t.Fatal(err)
	}
	if last := u[len(u)-1].Prompt; strings.Contains(last, debate.AnswerMask) || !strings.Contains(last, `\boxed{`) {
		t.Errorf("--no-mask message %q", last)
	}
	if _, err := ExpertPairs(ps, cfg.Ops, 2, debate.Prompt{}, 7); err == nil {
		t.Error("expert 2 of two kinds must be refused")
	}
}

// After a few UMAD steps on the experts task, the agents take the right claim from each
// other more often than before: their wrong-to-right flips at turn 1 exceed their
// right-to-wrong flips and the untrained agents' wrong-to-right flips, by margins
// (validation debates at steps 0 and the last, 32 held-out problems x 4 trajectories).
//
// Measured on libtorch 1.13 (the agents' mean at turn 1; untrained: W2C 0.137, C2W 0.242):
//   - as implemented: W2C 0.281, C2W 0.070 (W2C - C2W = 0.211, W2C gain 0.144);
//   - the influence reward's sign flipped: W2C 0.160, C2W 0.273 (-0.113, 0.023): fails;
//   - the NLL weight inverted (exp(+alpha z)): W2C 0.328, C2W 0.137 (0.191, 0.191): passes.
//     At this size the NLL weight's direction does not show; TestNLLWeightRanksAsThePaper
//     catches it.
//
// On libtorch 2.6 the warm start ends elsewhere (untrained W2C 0.113, C2W 0.129) and 30
// steps did not teach reading (W2C 0.168, C2W 0.203), so build.sh's torch2 run skips this
// test: it measures learning dynamics on 1.13's numerics, not the plugin's correctness,
// which the other tests check on both.
func TestExpertsLearnToRead(t *testing.T) {
	if testing.Short() {
		t.Skip("trains for about two minutes")
	}
	rt := torchtest.Open(t)
	task := data.SyntheticConfig{Terms: 2, MaxOperand: expertsMax, Ops: "+*", Task: data.TaskExperts}
	problems, err := data.SyntheticWith(expertsWarmStart, 1, task)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for expert, arch := range []string{"qwen2", "qwen3"} {
		pairs, err := ExpertPairs(problems, task.Ops, expert, debate.Prompt{}, 1)
		if err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, warmStartOn(t, rt, arch, pairs, expertsEpochs))
	}
	cfg := demoConfig(t, "umad", dirs, expertsSteps)
	cfg.Problems, _ = data.SyntheticWith(64, 1, task)
	cfg.ValProblems, _ = data.SyntheticWith(32, 1+1_000_003, task)
	cfg.Opt.LR = expertsLR
	cfg.Rollout.Deterministic = true // batches a function of the debate, not of the machine's load
	for i := range cfg.Agents {
		cfg.Agents[i].MaxTokens = 32
	}
	if err := Run(context.Background(), cfg, Live{Torch: rt}); err != nil {
		t.Fatal(err)
	}
	_, val := readMetrics(t, cfg.Out)
	if len(val) != 2 {
		t.Fatalf("%d validation lines, want 2", len(val))
	}
	flips := func(v trainlog.ValMetrics) (w2c, c2w float64) {
		for _, r := range v.Summary.Rows {
			if r.Turn == 1 && r.Agent >= 0 {
				w2c += r.FromPrevious.Strict.W2C / 2
				c2w += r.FromPrevious.Strict.C2W / 2
			}
		}
		return w2c, c2w
	}
	w2c0, c2w0 := flips(val[0])
	w2c, c2w := flips(val[1])
	t.Logf("turn 1 flips, agents' mean: before W2C %.3f C2W %.3f; after W2C %.3f C2W %.3f", w2c0, c2w0, w2c, c2w)
	if !(w2c-c2w >= 0.06) || !(w2c-w2c0 >= 0.1) {
		t.Errorf("after %d UMAD steps W2C %.3f, C2W %.3f (untrained W2C %.3f): want W2C at least 0.06 above C2W and 0.1 above the untrained",
			expertsSteps, w2c, c2w, w2c0)
	}
}

// TestExpertsLearnToRead's settings.
const (
	expertsMax       = 3
	expertsWarmStart = 128
	expertsEpochs    = 10
	expertsSteps     = 30
	expertsLR        = 4e-4
)
