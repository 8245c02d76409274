// Package recipe holds the named recipes of umad train and umad debate (--recipe): every
// setting the paper (../shared/spec/paper.tex) or the authors' code
// (../shared/spec/UMAD-reference.md) gives, as the flag that carries it, with where it comes
// from. This table is the one place these values live; the help texts print it.
package recipe

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Setting is one value a recipe sets: the flag that carries it, the value as that flag reads
// it (float64, int, bool or string) and its source.
type Setting struct {
	Flag   string `json:"flag"`
	Value  any    `json:"value"`
	Source string `json:"source"`
}

// Arg is the setting as a command line gives it: "--lr 1e-06", "-g 5".
func (s Setting) Arg() string { return fmt.Sprintf("%s %v", Flag(s.Flag), s.Value) }

// Flag is a flag's name as a command line gives it.
func Flag(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// Lengths are the response and prompt token limits of one kind of problem set.
type Lengths struct {
	MaxTokens, PromptLimit int
	Source                 string
}

// Recipe is one source's settings.
type Recipe struct {
	Name, Source string
	// Train holds what every algorithm trains with; Algos holds, for each algorithm the
	// source defines, its own settings, which replace Train's for the same flag.
	Train []Setting
	Algos map[string][]Setting
	// Debate holds what umad debate evaluates with.
	Debate []Setting
	// AIME and Other are the lengths of AIME problems and of every other set.
	AIME, Other Lengths
	// Departures are what the recipe runs otherwise than its source says, each with why;
	// a run prints them with the recipe's settings.
	Departures []string
}

// LoRALRScale multiplies a recipe's learning rate in a LoRA run: both sources train every
// weight, and LoRA's best learning rate is about 10 times full fine-tuning's (Schulman et
// al., "LoRA Without Regret", Thinking Machines 2025), so 1e-6 becomes 1e-5, the low end of
// the 1e-5 to 1e-4 LoRA usually wants.
const LoRALRScale = 10

// LoRALR is a recipe's learning rate lr for a LoRA run, to six significant digits (1e-6
// gives 1e-05, not 9.999999999999999e-06).
func LoRALR(lr float64) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(lr*LoRALRScale, 'g', 6, 64), 64)
	return v
}

// LoRAWhy says why, for help texts and the run's first lines.
const LoRAWhy = `both sources train every weight, and LoRA's best learning rate is about 10x full fine-tuning's ("LoRA Without Regret", Schulman et al. 2025)`

const (
	paper = "paper.tex"
	ref   = "UMAD-reference.md"
)

// recipes are the named recipes, in the order help texts list them.
var recipes = []Recipe{
	{
		Name: "paper", Source: "paper.tex: Table 3 (L763-801) and its equations",
		Train: []Setting{
			{"temperature", 0.8, paper + " Table 3, training temperature"},
			{"top-p", 0.95, paper + " Table 3"},
			{"lr", 1e-6, paper + " Table 3"},
			{"weight-decay", 0.01, paper + " Table 3; its \"Adam\" with weight decay is AdamW"},
			{"grad-clip", 1.0, paper + " Table 3"},
			{"loss", "ppo", paper + " GRPO objective (L182-190): the clipped surrogate"},
			{"clip-low", 0.2, paper + " Table 3, clip ratio"},
			{"clip-high", 0.2, paper + " Table 3, clip ratio"},
			{"clip-c", 0.0, paper + " GRPO objective: no dual clip"},
			{"loss-agg", "seq-mean-token-mean", paper + " GRPO objective: 1/G sum_i 1/|y_i| sum_j"},
			{"kl-in-loss", true, paper + " GRPO objective and L738: -beta D_KL in the loss, as k3 (GRPO's estimator)"},
			{"kl-coef", 0.001, paper + " Table 3, beta"},
			{"batch", 256, paper + " Table 3"},
			{"epochs", 2, paper + " Table 3"},
			{"turns", 2, paper + " Table 3, T_train"},
			{"g", 5, paper + " Table 3, group size"},
			{"reward", "strict", paper + " L804: the MATH benchmark's strict equivalence"},
			{"val-temperature", 0.6, paper + " Table 3, inference temperature"},
			{"no-mask", true, paper + " L995-997: the debate prompt shows [Agent i reasoning and answer]"},
		},
		Algos: map[string][]Setting{
			"umad": {
				{"influence", "peer-mean", paper + " L389: eta/(N-1) sum over peers of their correctness change"},
				{"eta", 0.25, paper + " Table 3 and L804"},
				{"nll-alpha", 0.25, paper + " Table 3, alpha_au"},
			},
			"intrinsic-only": {
				{"influence", "peer-mean", paper + " L389 (ablation, L962)"},
				{"eta", 0.25, paper + " Table 3 (ablation, L962)"},
			},
			"nll-only": {{"nll-alpha", 0.25, paper + " Table 3 (ablation, L962)"}},
			"ippo":     nil,
			"grpo": {
				{"turns", 1, paper + " L402: Single-GRPO pair, each model fine-tuned alone"},
				{"epochs", 15, paper + " L402: 15 epochs until convergence"},
			},
		},
		Debate: []Setting{
			{"temperature", 0.6, paper + " Table 3, inference temperature"},
			{"top-p", 0.95, paper + " Table 3"},
			{"turns", 5, paper + " Table 3, T_test"},
			{"k", 1, paper + " L402: pass@1, one trajectory"},
			{"seeds", "1,2,3,4,5", paper + " L402: five evaluation seeds (which ones it does not say)"},
			{"no-mask", true, paper + " L995-997: the debate prompt shows [Agent i reasoning and answer]"},
		},
		AIME:  Lengths{4096, 9216, paper + " L811"},
		Other: Lengths{2048, 5120, paper + " Table 3 and L811"},
		Departures: []string{
			"training updates each agent in one phase per debate turn (turn 1's log-probs recomputed after turn 0's update), as the authors' code does (" + ref + " 8, item 6); the paper's Algorithm 2 (L702-743) makes one update per step, which umad's trainer does not offer",
		},
	},
	{
		Name: "reference", Source: "the authors' code as UMAD-reference.md gives it (bash/ippo_grpo.sh, marl/config/ippo_trainer.yaml, section 3.7)",
		Train: []Setting{
			{"temperature", 0.6, ref + " 1.3 (the launcher leaves the yaml's 0.6)"},
			{"top-p", 0.95, ref + " 1.3"},
			{"lr", 1e-6, ref + " 4.4"},
			{"weight-decay", 0.01, ref + " 4.4"},
			{"grad-clip", 1.0, ref + " 4.4"},
			{"loss", "ppo", ref + " 4.2"},
			{"clip-low", 0.2, ref + " 4.2"},
			{"clip-high", 0.2, ref + " 4.2"},
			{"clip-c", 3.0, ref + " 4.2, dual clip"},
			{"loss-agg", "token-mean", ref + " 4.3, per group"},
			{"kl-in-loss", false, ref + " 3.3: k1 in the reward"},
			{"kl-coef", 0.001, ref + " 3.3"},
			{"batch", 128, ref + " 0 (ippo_grpo.sh:L50)"},
			{"mini-batch", 16, ref + " 4.3"},
			{"epochs", 2, ref + " 4.6"},
			{"turns", 2, ref + " 0"},
			{"g", 5, ref + " 0"},
			{"val-every", 20, ref + " 4.6"},
			{"save-every", 40, ref + " 4.6"},
			{"reward", "strict", ref + " 2.2"},
			{"val-temperature", 0.6, ref + " 1.3 (rollout.val_kwargs T 0.6)"},
			{"no-mask", false, ref + " 1.4, step 3: each peer's last \\boxed answer becomes <answer>"},
		},
		Algos: map[string][]Setting{
			"umad": {
				{"influence", "sign", ref + " 3.2: eta sign(team change)"},
				{"eta", 0.2, ref + " 3.2"},
				{"nll-alpha", 0.25, ref + " 3.5"},
			},
			"intrinsic-only": {
				{"influence", "sign", ref + " 3.2 (ablation mapping, 6)"},
				{"eta", 0.2, ref + " 3.2 (ablation mapping, 6)"},
			},
			"nll-only": {{"nll-alpha", 0.25, ref + " 3.5 (ablation mapping, 6)"}},
			"ippo":     nil,
			"grpo": { // bash/run_single_agent_train.sh, the Single-GRPO pair (ablation mapping, 6)
				{"turns", 1, ref + " 6: run_single_agent_train.sh"},
				{"batch", 1024, ref + " 6: run_single_agent_train.sh"},
				{"mini-batch", 256, ref + " 6: run_single_agent_train.sh"},
				{"epochs", 15, ref + " 6: run_single_agent_train.sh"},
				{"prompt-limit", 2048, ref + " 6: run_single_agent_train.sh"},
				{"kl-in-loss", true, ref + " 4.2: low_var_kl (k3) 0.001 in the loss"},
			},
		},
		Debate: []Setting{
			{"temperature", 0.6, ref + " 5.2 (run_debate_eval.sh)"},
			{"top-p", 0.95, ref + " 5.2"},
			{"turns", 5, ref + " 5.2"},
			{"k", 1, ref + " 5.2, VAL_N 1"},
			{"no-mask", false, ref + " 1.4, step 3: each peer's last \\boxed answer becomes <answer>"},
		},
		AIME:  Lengths{8192, 8192, ref + " 1.3 (eval/README.md's suggestion for AIME)"},
		Other: Lengths{2048, 5120, ref + " 1.3 (ippo_grpo.sh:L51-52, run_debate_eval.sh)"},
	},
}

// Names lists the recipes in a fixed order.
func Names() []string {
	names := make([]string, len(recipes))
	for i, r := range recipes {
		names[i] = r.Name
	}
	return names
}

// Lookup returns the named recipe.
func Lookup(name string) (Recipe, error) {
	for _, r := range recipes {
		if r.Name == name {
			return r, nil
		}
	}
	return Recipe{}, fmt.Errorf("unknown recipe %q (want %s)", name, strings.Join(Names(), " or "))
}

// IsAIME reports whether a problem set is AIME (aime24, aime_2025, ...), which the paper
// gives longer lengths.
func IsAIME(dataset string) bool { return strings.Contains(strings.ToLower(dataset), "aime") }

// LengthsFor returns the lengths of problems from the named sets; a mix of AIME and other
// sets has no one answer.
func (r Recipe) LengthsFor(datasets []string) (Lengths, error) {
	var aime, other []string
	for _, d := range datasets {
		if IsAIME(d) {
			aime = append(aime, d)
		} else {
			other = append(other, d)
		}
	}
	if len(aime) > 0 && len(other) > 0 {
		return Lengths{}, fmt.Errorf("--recipe %s sets lengths per problem set (AIME %d/%d response/prompt tokens, others %d/%d) and these problems mix %s with %s: run them apart, or give --max-tokens and --prompt-limit",
			r.Name, r.AIME.MaxTokens, r.AIME.PromptLimit, r.Other.MaxTokens, r.Other.PromptLimit, strings.Join(aime, ", "), strings.Join(other, ", "))
	}
	if len(aime) > 0 {
		return r.AIME, nil
	}
	return r.Other, nil
}

// Settings returns what the recipe sets for umad train with algo (command "train") or for
// umad debate ("debate", algo ""), with the lengths l (none when l is zero). A later
// setting of a flag replaces an earlier one: the algorithm's replace the lengths and the
// common ones.
func (r Recipe) Settings(command, algo string, l Lengths) ([]Setting, error) {
	var out []Setting
	if l.MaxTokens > 0 {
		out = append(out, Setting{"max-tokens", l.MaxTokens, l.Source}, Setting{"prompt-limit", l.PromptLimit, l.Source})
	}
	switch command {
	case "debate":
		return merge(out, r.Debate), nil
	case "train":
		own, ok := r.Algos[algo]
		if !ok {
			return nil, fmt.Errorf("--recipe %s does not define --algo %s (it defines %s)", r.Name, algo, strings.Join(r.algoNames(), ", "))
		}
		return merge(merge(out, r.Train), own), nil
	}
	return nil, fmt.Errorf("recipe: unknown command %q", command)
}

// merge returns base with each of more's settings replacing base's of the same flag, or
// appended.
func merge(base, more []Setting) []Setting {
	out := slices.Clone(base)
	for _, s := range more {
		if i := slices.IndexFunc(out, func(o Setting) bool { return o.Flag == s.Flag }); i >= 0 {
			out[i] = s
		} else {
			out = append(out, s)
		}
	}
	return out
}

func (r Recipe) algoNames() []string {
	var names []string
	for n := range r.Algos {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Help describes every recipe for a command's help text: each setting with its source.
func Help(command string) string {
	var b strings.Builder
	for _, r := range recipes {
		fmt.Fprintf(&b, "  %s: %s\n", r.Name, r.Source)
		common := r.Debate
		if command == "train" {
			common = r.Train
		}
		for _, s := range common {
			fmt.Fprintf(&b, "    %s  (%s)\n", s.Arg(), s.Source)
		}
		fmt.Fprintf(&b, "    --max-tokens/--prompt-limit %d/%d, AIME %d/%d  (%s; %s)\n",
			r.Other.MaxTokens, r.Other.PromptLimit, r.AIME.MaxTokens, r.AIME.PromptLimit, r.Other.Source, r.AIME.Source)
		if command == "train" {
			for _, d := range r.Departures {
				fmt.Fprintf(&b, "    departs from its source: %s\n", d)
			}
		}
		if command != "train" {
			continue
		}
		for _, name := range r.algoNames() {
			fmt.Fprintf(&b, "    --algo %s:", name)
			if len(r.Algos[name]) == 0 {
				b.WriteString(" nothing more")
			}
			b.WriteString("\n")
			for _, s := range r.Algos[name] {
				fmt.Fprintf(&b, "      %s  (%s)\n", s.Arg(), s.Source)
			}
		}
	}
	return b.String()
}
