package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/grade"
	"github.com/umad-dev/umad/internal/testmodel"
	"github.com/umad-dev/umad/recipe"
	"github.com/umad-dev/umad/run"
	"github.com/umad-dev/umad/trainer"
	"github.com/umad-dev/umad/trainspec"
)

// resolveOnly parses args with a command's own flags and returns what resolve makes of
// them, without running the command.
func resolveOnly[T any](t *testing.T, command string, resolve func(*ucli.Context) (T, error), args ...string) (T, error) {
	t.Helper()
	var got T
	var out bytes.Buffer
	app := App()
	app.Writer, app.ErrWriter = &out, &out
	app.Commands = slices.Clone(app.Commands) // the registered commands stay as they are
	for i, cmd := range app.Commands {
		if cmd.Name == command {
			own := *cmd
			own.Action = func(c *ucli.Context) (err error) { got, err = resolve(c); return err }
			app.Commands[i] = &own
		}
	}
	err := app.Run(append([]string{"umad", command}, args...))
	return got, err
}

// resolvedTrain is a resolved umad train, with the settings that Resolve leaves to the
// run.
type resolvedTrain struct {
	run.TrainSettings
	epochs, steps int
	lines         string // the run's first lines
}

func resolveTrainArgs(t *testing.T, args ...string) (resolvedTrain, error) {
	t.Helper()
	args = append([]string{"--agent", filepath.Join(testmodel.Tiny(t, "qwen2"), "hf"), "--out", t.TempDir()}, args...)
	return resolveOnly(t, "train", func(c *ucli.Context) (resolvedTrain, error) {
		r, err := trainFromFlags(c)
		if err != nil {
			return resolvedTrain{}, err
		}
		rc, err := r.Resolve()
		var lines strings.Builder
		run.WriteRecipe(&lines, rc.Recipe, r.Keys(), true)
		return resolvedTrain{rc, r.Epochs, r.Steps, lines.String()}, err
	}, args...)
}

func resolveDebateArgs(t *testing.T, args ...string) (run.DebateSettings, error) {
	t.Helper()
	args = append([]string{"--agent", "a.gguf", "--agent", "b.gguf", "--out", t.TempDir()}, args...)
	return resolveOnly(t, "debate", func(c *ucli.Context) (run.DebateSettings, error) {
		d, err := debateFromFlags(c)
		return d.Settings, err
	}, args...)
}

func valTemperature(r resolvedTrain) any { return *r.Trainer.ValTemperature }

// A value a recipe must resolve to, with where the source gives it.
type recipeCheck struct {
	what string
	got  func(r resolvedTrain) any
	want any
}

func (v recipeCheck) check(t *testing.T, r resolvedTrain) {
	t.Run(v.what, func(t *testing.T) {
		if got := v.got(r); !reflect.DeepEqual(got, v.want) {
			t.Errorf("%v, want %v", got, v.want)
		}
	})
}

var (
	temperature = func(r resolvedTrain) any { return r.Trainer.Agents[0].Params.Temperature }
	topP        = func(r resolvedTrain) any { return r.Trainer.Agents[0].Params.TopP }
	maxTokens   = func(r resolvedTrain) any { return r.Trainer.Agents[0].MaxTokens }
	promptLimit = func(r resolvedTrain) any { return r.Trainer.PromptLimit }
	lr          = func(r resolvedTrain) any { return r.Trainer.Opt.LR }
	klInLoss    = func(r resolvedTrain) any { return [2]float64{r.Trainer.Algo.KLLossCoef, r.Trainer.Algo.KLRewardCoef} }
	influence   = func(r resolvedTrain) any { return r.Trainer.Algo.Influence }
	eta         = func(r resolvedTrain) any { return r.Trainer.Algo.Eta }
	alpha       = func(r resolvedTrain) any { return r.Trainer.Algo.NLLAlpha }
	batch       = func(r resolvedTrain) any { return r.Trainer.BatchSize }
	miniBatch   = func(r resolvedTrain) any { return r.Trainer.MiniBatch }
	epochs      = func(r resolvedTrain) any { return r.epochs }
	turns       = func(r resolvedTrain) any { return r.Trainer.Turns }
)

// --recipe paper resolves to Table 3 of the paper and its GRPO objective, value by value.
func TestRecipePaperValues(t *testing.T) {
	r, err := resolveTrainArgs(t, "--recipe", "paper", "--algo", "umad")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []recipeCheck{
		{"training temperature 0.8", temperature, 0.8},
		{"top-p 0.95", topP, 0.95},
		{"max response length 2048", maxTokens, 2048},
		{"max prompt length 5120", promptLimit, 5120},
		{"learning rate 1e-6", lr, 1e-6},
		{"weight decay 0.01", func(r resolvedTrain) any { return r.Trainer.Opt.WeightDecay }, 0.01},
		{"gradient clipping norm 1.0", func(r resolvedTrain) any { return r.Trainer.Opt.MaxGradNorm }, 1.0},
		{"clipped surrogate", func(r resolvedTrain) any { return r.Trainer.Loss }, trainspec.LossPPO},
		{"clip ratio 0.2", func(r resolvedTrain) any { return [2]float64{r.Trainer.ClipLow, r.Trainer.ClipHigh} }, [2]float64{0.2, 0.2}},
		{"no dual clip", func(r resolvedTrain) any { return r.Trainer.ClipC }, 0.0},
		{"1/G sum 1/|y| sum: seq-mean-token-mean", func(r resolvedTrain) any { return r.Trainer.Agg }, trainspec.SeqMeanTokenMean},
		{"beta 0.001 KL in the loss", klInLoss, [2]float64{0.001, 0}},
		{"influence eta/(N-1) sum of peers' change", influence, trainer.InfluencePeerMean},
		{"eta 0.25", eta, 0.25},
		{"alpha_au 0.25", alpha, 0.25},
		{"train batch 256", batch, 256},
		{"2 epochs", epochs, 2},
		{"T_train 2", turns, 2},
		{"G 5", func(r resolvedTrain) any { return r.Trainer.G }, 5},
		{"strict equivalence", func(r resolvedTrain) any { return r.Trainer.Reward }, grade.Strict},
		{"team reward sum", func(r resolvedTrain) any { return r.Trainer.Algo.Team }, trainer.TeamSum},
		{"validation at the inference temperature 0.6", valTemperature, 0.6},
		{"the debate prompt shows the answers (L995-997)", func(r resolvedTrain) any { return r.Trainer.NoMask }, true},
	} {
		v.check(t, r)
	}
	// The ablations keep their own axes; the Single-GRPO pair trains one turn for 15 epochs.
	for _, tc := range []struct {
		algo   string
		values []recipeCheck
	}{
		{"ippo", []recipeCheck{{"no influence", influence, trainer.InfluenceOff}, {"no NLL weight", alpha, 0.0}, {"KL in the loss", klInLoss, [2]float64{0.001, 0}}}},
		{"nll-only", []recipeCheck{{"no influence", influence, trainer.InfluenceOff}, {"alpha 0.25", alpha, 0.25}}},
		{"intrinsic-only", []recipeCheck{{"peer-mean", influence, trainer.InfluencePeerMean}, {"eta 0.25", eta, 0.25}, {"no NLL weight", alpha, 0.0}}},
		{"grpo", []recipeCheck{{"one turn", turns, 1}, {"15 epochs", epochs, 15}, {"temperature 0.8", temperature, 0.8}, {"KL in the loss", klInLoss, [2]float64{0.001, 0}}}},
	} {
		t.Run(tc.algo, func(t *testing.T) {
			r, err := resolveTrainArgs(t, "--recipe", "paper", "--algo", tc.algo)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range tc.values {
				v.check(t, r)
			}
		})
	}
	// AIME gets 4,096 response and 9,216 prompt tokens (paper L811).
	r, err = resolveTrainArgs(t, "--recipe", "paper", "--algo", "umad", "--data", sharedData(t, "aime24/test.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	recipeCheck{"AIME response length 4096", maxTokens, 4096}.check(t, r)
	recipeCheck{"AIME prompt length 9216", promptLimit, 9216}.check(t, r)
}

// --recipe reference resolves to the reference run (UMAD-reference.md), value by value, and
// that is umad's defaults: the recipe changes nothing but the record.
func TestRecipeReferenceValues(t *testing.T) {
	r, err := resolveTrainArgs(t, "--recipe", "reference", "--algo", "umad")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []recipeCheck{
		{"temperature 0.6", temperature, 0.6},
		{"top-p 0.95", topP, 0.95},
		{"response length 2048", maxTokens, 2048},
		{"prompt length 5120", promptLimit, 5120},
		{"lr 1e-6", lr, 1e-6},
		{"dual clip 3", func(r resolvedTrain) any { return [3]float64{r.Trainer.ClipLow, r.Trainer.ClipHigh, r.Trainer.ClipC} }, [3]float64{0.2, 0.2, 3}},
		{"token-mean per group", func(r resolvedTrain) any { return r.Trainer.Agg }, trainspec.TokenMean},
		{"k1 KL 0.001 in the reward", klInLoss, [2]float64{0, 0.001}},
		{"influence sign", influence, trainer.InfluenceSign},
		{"eta 0.2", eta, 0.2},
		{"alpha 0.25", alpha, 0.25},
		{"batch 128", batch, 128},
		{"mini-batch 16", miniBatch, 16},
		{"2 epochs", epochs, 2},
		{"2 turns", turns, 2},
		{"validate every 20", func(r resolvedTrain) any { return r.Trainer.ValEvery }, 20},
		{"save every 40", func(r resolvedTrain) any { return r.Trainer.SaveEvery }, 40},
		{"validation temperature 0.6", valTemperature, 0.6},
		{"peers' answers masked (1.4, step 3)", func(r resolvedTrain) any { return r.Trainer.NoMask }, false},
	} {
		v.check(t, r)
	}
	for _, algo := range []string{"ippo", "umad", "nll-only", "intrinsic-only"} {
		with, err := resolveTrainArgs(t, "--recipe", "reference", "--algo", algo)
		if err != nil {
			t.Fatal(err)
		}
		without, err := resolveTrainArgs(t, "--algo", algo)
		if err != nil {
			t.Fatal(err)
		}
		if with.Recipe == nil || without.Recipe != nil {
			t.Fatalf("%s: recipe records %v and %v", algo, with.Recipe, without.Recipe)
		}
		with.Recipe, with.lines = nil, ""
		if !reflect.DeepEqual(with, without) {
			t.Errorf("%s: --recipe reference resolves to\n%+v\numad's defaults to\n%+v", algo, with, without)
		}
	}
	// The Single-GRPO pair: bash/run_single_agent_train.sh.
	r, err = resolveTrainArgs(t, "--recipe", "reference", "--algo", "grpo")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []recipeCheck{{"batch 1024", batch, 1024}, {"mini-batch 256", miniBatch, 256}, {"15 epochs", epochs, 15},
		{"prompt length 2048", promptLimit, 2048}, {"k3 KL in the loss", klInLoss, [2]float64{0.001, 0}}, {"one turn", turns, 1}} {
		v.check(t, r)
	}
}

// A flag given explicitly overrides the recipe and is recorded as an override, in
// config.json's record and in the run's first lines; a flag given with the recipe's own
// value is no override. A LoRA run's recipe learning rate is 10 times the source's.
func TestRecipeOverrides(t *testing.T) {
	r, err := resolveTrainArgs(t, "--recipe", "paper", "--algo", "umad", "--lr", "2e-6", "--temperature", "0.8", "--steps", "3", "--influence", "sign")
	if err != nil {
		t.Fatal(err)
	}
	if r.Trainer.Opt.LR != 2e-6 || r.Trainer.Algo.Influence != trainer.InfluenceSign || r.steps != 3 {
		t.Errorf("lr %g, influence %s, steps %d: the flags given did not override the recipe", r.Trainer.Opt.LR, r.Trainer.Algo.Influence, r.steps)
	}
	var given []string
	for _, o := range r.Recipe.Overrides {
		given = append(given, o.Flag)
	}
	if want := []string{"lr", "influence", "steps"}; !sameSet(given, want) {
		t.Errorf("overrides %v, want %v", given, want)
	}
	for _, want := range []string{"recipe paper: paper.tex: Table 3", "--temperature 0.8  (paper.tex Table 3", "override: --lr 2e-06 instead of the recipe's --lr 1e-06",
		"override: --influence sign instead of the recipe's --influence peer-mean", "override: --steps 3 instead of the recipe's --epochs 2",
		"departs from its source: training updates each agent in one phase per debate turn"} {
		if !strings.Contains(r.lines, want) {
			t.Errorf("first lines lack %q:\n%s", want, r.lines)
		}
	}

	// --steps 0 trains --epochs passes: the recipe's, here the Single-GRPO pair's 15.
	if r, err := resolveTrainArgs(t, "--recipe", "paper", "--algo", "grpo", "--steps", "0"); err != nil || r.epochs != 15 || len(r.Recipe.Overrides) != 0 {
		t.Errorf("--steps 0: %d epochs, overrides %v (%v); want the recipe's 15 and none", r.epochs, r.Recipe.Overrides, err)
	}

	for _, tc := range []struct {
		args []string
		want float64
	}{{[]string{"--lora-rank", "4"}, 1e-5}, {[]string{"--lora-rank", "4", "--lr", "3e-5"}, 3e-5}, {nil, 1e-6},
		// An explicit --lr equal to the recipe's is given, not the recipe's: never scaled.
		{[]string{"--lora-rank", "4", "--lr", "1e-6"}, 1e-6}} {
		r, err := resolveTrainArgs(t, append([]string{"--recipe", "paper", "--algo", "ippo"}, tc.args...)...)
		if err != nil {
			t.Fatal(err)
		}
		if r.Trainer.Opt.LR != tc.want {
			t.Errorf("%v: lr %g, want %g", tc.args, r.Trainer.Opt.LR, tc.want)
		}
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// The recipes of umad debate: the paper's inference settings, the reference's
// evaluation, lengths by problem set, and --seed overriding the paper's five seeds.
func TestRecipeDebate(t *testing.T) {
	aime, math500 := sharedData(t, "aime24/test.jsonl"), sharedData(t, "math500/test.jsonl")
	for _, tc := range []struct {
		args                        []string
		temp                        float64
		turns, k, maxTokens, prompt int
		seeds                       []uint64
	}{
		{[]string{"--recipe", "paper", "--data", math500}, 0.6, 5, 1, 2048, 5120, []uint64{1, 2, 3, 4, 5}},
		{[]string{"--recipe", "paper", "--data", aime}, 0.6, 5, 1, 4096, 9216, []uint64{1, 2, 3, 4, 5}},
		{[]string{"--recipe", "reference", "--data", aime}, 0.6, 5, 1, 8192, 8192, []uint64{1}},
		{[]string{"--recipe", "paper", "--data", aime, "--seed", "7", "-k", "16", "--temperature", "1.0"}, 1.0, 5, 16, 4096, 9216, []uint64{7}},
	} {
		cfg, err := resolveDebateArgs(t, tc.args...)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		a := cfg.Agents[0]
		if a.Params.Temperature != tc.temp || a.Params.TopP != 0.95 || cfg.Turns != tc.turns || cfg.K != tc.k || a.MaxTokens != tc.maxTokens ||
			cfg.PromptLimit != tc.prompt || !slices.Equal(cfg.Seeds, tc.seeds) || cfg.Ctx != tc.maxTokens+tc.prompt {
			t.Errorf("%v: temperature %g top-p %g, %d turns, k %d, lengths %d/%d (ctx %d), seeds %v", tc.args, a.Params.Temperature, a.Params.TopP,
				cfg.Turns, cfg.K, a.MaxTokens, cfg.PromptLimit, cfg.Ctx, cfg.Seeds)
		}
	}
}

// What a recipe cannot do is refused in one line: an unknown recipe, lengths for a mix of
// AIME and other problems, and a flag that turns the recipe's algorithm into another.
func TestRecipeRefusals(t *testing.T) {
	mixed := writeLines(t,
		`{"prompt": [{"role": "user", "content": "What is 1+1?"}], "reward_model": {"ground_truth": "2"}, "extra_info": {"subset": "aime24", "index": 0}}`,
		`{"prompt": [{"role": "user", "content": "What is 2+2?"}], "reward_model": {"ground_truth": "4"}, "extra_info": {"subset": "math500", "index": 1}}`)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--recipe", "papers", "--algo", "umad"}, `--recipe: unknown recipe "papers" (want paper or reference)`},
		{[]string{"--recipe", "paper", "--algo", "ppo"}, `unknown algorithm "ppo"`},
		{[]string{"--recipe", "paper", "--algo", "umad", "--data", mixed}, "these problems mix aime24 with math500: run them apart, or give --max-tokens and --prompt-limit"},
		{[]string{"--recipe", "paper", "--algo", "ippo", "--influence", "peer-mean"}, "ippo has no influence reward; that is intrinsic-only (--algo intrinsic-only)"},
		{[]string{"--recipe", "reference", "--algo", "nll-only", "--eta", "0.2"}, "that is umad"},
		// Issue 30: the README's "paper variant" flags turned these baselines into others.
		{[]string{"--algo", "ippo", "--influence", "peer-mean", "--eta", "0.25", "--kl-in-loss"}, "--algo ippo --influence peer-mean --eta 0.25: ippo has no influence reward; that is intrinsic-only"},
		{[]string{"--algo", "nll-only", "--influence", "peer-mean", "--eta", "0.25"}, "nll-only has no influence reward; that is umad (--algo umad)"},
	} {
		if _, err := resolveTrainArgs(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
	// What defines no algorithm stays free: the influence reward's form and strength, alpha,
	// the KL's place and coefficient.
	free, err := resolveTrainArgs(t, "--algo", "umad", "--influence", "peer-mean", "--eta", "0.3", "--nll-alpha", "0.5", "--kl-in-loss", "--kl-coef", "0.01")
	if err != nil {
		t.Fatal(err)
	}
	if a := free.Trainer.Algo; a.Name != "umad" || a.Influence != trainer.InfluencePeerMean || a.Eta != 0.3 || a.NLLAlpha != 0.5 || a.KLLossCoef != 0.01 || a.KLRewardCoef != 0 {
		t.Errorf("free axes resolved to %+v", a)
	}
	// Both lengths given: the mix needs no recipe lengths.
	if _, err := resolveTrainArgs(t, "--recipe", "paper", "--algo", "umad", "--data", mixed, "--max-tokens", "3000", "--prompt-limit", "6000"); err != nil {
		t.Errorf("a mixed set with both lengths given: %v", err)
	}
	if _, err := resolveDebateArgs(t, "--recipe", "paper", "--data", mixed); err == nil || !strings.Contains(err.Error(), "mix aime24 with math500") {
		t.Errorf("debate of a mixed set: %v", err)
	}
}

// Every flag a recipe sets is a flag of its command, so that applying it cannot fail.
func TestRecipeFlagsExist(t *testing.T) {
	flags := map[string]map[string]bool{}
	for _, cmd := range App().Commands {
		flags[cmd.Name] = map[string]bool{}
		for _, f := range cmd.Flags {
			for _, n := range f.Names() {
				flags[cmd.Name][n] = true
			}
		}
	}
	for _, name := range recipe.Names() {
		r, _ := recipe.Lookup(name)
		check := func(command, algo string) {
			s, err := r.Settings(command, algo, r.AIME)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range s {
				if !flags[command][s.Flag] || !flags[command]["recipe"] {
					t.Errorf("recipe %s sets --%s, which umad %s lacks", name, s.Flag, command)
				}
			}
		}
		check("debate", "")
		for _, algo := range trainer.AlgoNames() {
			check("train", algo)
		}
	}
}

// A debate run records its recipe in config.json and lists it first.
func TestRecipeDebateRun(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	_, stderr, err := runApp(t, "debate", "--agent", testmodel.GGUF(t, "qwen2"), "--recipe", "paper", "--synthetic", "2", "-k", "2", "--turns", "1",
		"--seeds", "1", "--max-tokens", "4", "--prompt-limit", "512", "--threads", "1", "--kv-type", "f32", "--flash-attn", "off", "--out", out)
	if err != nil {
		t.Fatalf("debate --recipe paper: %v\n%s", err, stderr)
	}
	if !strings.HasPrefix(stderr, "recipe paper: ") || !strings.Contains(stderr, "override: --turns 1 instead of the recipe's --turns 5") {
		t.Errorf("the run's first lines do not give the recipe and its overrides:\n%s", stderr)
	}
	b, err := os.ReadFile(filepath.Join(out, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"name": "paper"`, `"flag": "temperature"`, `"value": "0.6"`, `"given_flag": "seeds"`, `"mask": false`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("config.json lacks %s:\n%s", want, b)
		}
	}
}

// A training run under the paper's recipe (seq-mean-token-mean, no dual clip, k3 KL in the
// loss) trains, lists the recipe and its overrides first, records them in config.json, and
// resumes under the same command.
func TestRecipeTrainRun(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	_, stderr, err := runApp(t, trainArgs(t, out, "1", "--recipe", "paper", "--val-synthetic", "0")...)
	if err != nil {
		t.Fatalf("train --recipe paper: %v\n%s", err, stderr)
	}
	if !strings.HasPrefix(stderr, "recipe paper: ") || !strings.Contains(stderr, "override: --batch 4 instead of the recipe's --batch 256") {
		t.Errorf("the run's first lines do not give the recipe and its overrides:\n%s", stderr)
	}
	b, err := os.ReadFile(filepath.Join(out, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"name": "paper"`, `"flag": "loss-agg"`, `"loss_agg": "seq-mean-token-mean"`, `"clip_c": 0`, `"given_flag": "g"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("config.json lacks %s:\n%s", want, b)
		}
	}
	if _, stderr, err := runApp(t, trainArgs(t, out, "2", "--recipe", "paper", "--val-synthetic", "0", "--resume")...); err != nil {
		t.Fatalf("resume: %v\n%s", err, stderr)
	}
	if _, _, err := runApp(t, trainArgs(t, out, "2", "--recipe", "reference", "--val-synthetic", "0", "--resume")...); err == nil || !strings.Contains(err.Error(), "holds a run with other settings") {
		t.Errorf("resuming under another recipe: %v", err)
	}
}
