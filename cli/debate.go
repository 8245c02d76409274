package cli

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/data"
	"github.com/umad-dev/umad/run"
)

func init() {
	register(&ucli.Command{
		Name:  "debate",
		Usage: "run a multi-agent debate over a problem set and report accuracy and uncertainty turn by turn",
		UsageText: "umad debate --agent a.gguf --agent b.gguf [--data FILE|DIR] [-k 4] [--turns 3] [--max-tokens 2048] [--seeds 1,2,3] --out RUN\n" +
			"umad debate --agent 'a.gguf,temperature=0.7,seed=96' --agent 'b.gguf,chat-format=qwen3' --data ../shared/data/math500/test.jsonl --out runs/x",
		Description: "Each problem is debated in K trajectories for T turns (the UMAD reference protocol):\n" +
			"turn 0 asks every agent the question with the boxed-answer instruction (K samples per agent);\n" +
			"each later turn gives every agent of trajectory k one new user message holding all agents'\n" +
			"previous responses with their final boxed answers masked as <answer>.\n" +
			"--protocol probe is the paper's Algorithm 1 instead: one debate per problem; at each turn every\n" +
			"agent draws K samples from its context (they give the turn's answer distributions and TU/EU/AU)\n" +
			"and one continuation from the same context (--continue sample|greedy), sharing its prefill; the\n" +
			"continuations build the next turn's message as above.\n\n" +
			"--agent takes a GGUF path and optional comma-separated settings: name=, seed=, temperature=,\n" +
			"top-p=, top-k=, min-p=, max-tokens=, chat-format=. Agents on the same file share one engine.\n" +
			"--agent RUN,agent=I debates agent I of the newest checkpoint of the `umad train` run RUN.\n" +
			"--data takes any format `umad grade`'s loaders read (JSONL, MATH folders, Parquet); without it\n" +
			"the built-in synthetic arithmetic set is used.\n\n" +
			"The run directory gets config.json, seed-S/rollouts.jsonl.zst (every turn of every trajectory:\n" +
			"prompts, responses, tokens, log-probs, answers, verdicts) and report/ (summary.json, CSV tables,\n" +
			"report.md, SVG and PNG figures). Ctrl-C stops cleanly; the same command resumes.\n\n" +
			"With --verifier MODEL.gguf (and --verifier-prompt, as in umad grade), the answers robust's rules\n" +
			"do not decide go to a verifier model as each problem finishes; the robust figures count its\n" +
			"\"equal\", and the run counts the answers it decided.\n\n" +
			recipeHelp("debate"),
		Flags:  debateFlags(),
		Action: debateCmd,
	})
}

// debateFlags are debate's flags, showing umad's defaults (run.DefaultDebate).
func debateFlags() []ucli.Flag {
	d := run.DefaultDebate()
	s := d.Settings
	return append([]ucli.Flag{
		&ucli.StringSliceFlag{Name: "agent", Aliases: []string{"a"}, Usage: "agent: GGUF path[,key=value...] (repeat per agent); RUN,agent=I debates agent I of training run RUN's newest checkpoint", Required: true},
		&ucli.StringFlag{Name: "data", Aliases: []string{"d"}, Usage: "problem set file or folder (default: built-in synthetic set)"},
		recipeFlag(),
		&ucli.IntFlag{Name: "synthetic", Value: s.Synthetic, Usage: "problems of the built-in set, when --data is not given"},
		&ucli.IntFlag{Name: "limit", Usage: "debate at most this many problems (0 = all)"},
		&ucli.Float64Flag{Name: "sample-ratio", Usage: "debate a seeded random share of the problems (0 = all)"},
		&ucli.IntFlag{Name: "k", Value: s.K, Usage: "trajectories per problem (--protocol probe: samples per agent and turn)"},
		&ucli.StringFlag{Name: "protocol", Value: s.Protocol, Usage: "trajectories (K debates per problem, the UMAD reference's) or probe (the paper's Algorithm 1: one debate, K samples per agent and turn from its context)"},
		&ucli.StringFlag{Name: "continue", Value: run.DefaultContinue, Usage: "with --protocol probe: each agent's response that continues the debate is sampled with its settings (sample) or greedy"},
		&ucli.IntFlag{Name: "turns", Value: s.Turns, Usage: "turns T: the first answer plus T-1 debate rounds"},
		&ucli.StringFlag{Name: "seeds", Value: seedsText(s.Seeds), Usage: "evaluation seeds, comma-separated; mean and std over them are reported"},
		&ucli.IntFlag{Name: "prompt-limit", Value: s.PromptLimit, Usage: "most prompt tokens; longer debate prompts trim the peers' reasoning from the left"},
		&ucli.StringSliceFlag{Name: "stop", Usage: "adaptive stopping: agree=R (all agents agreed R turns in a row) or eu=X (EU below X)"},
		&ucli.IntFlag{Name: "slots", Value: d.Slots, Usage: "parallel sequences per model"},
		&ucli.StringFlag{Name: "out", Aliases: []string{"o"}, Usage: "run directory", Required: true},
		&ucli.IntFlag{Name: "nproc", Value: d.NProc, Usage: "processes on this machine, each debating a share of the problems with its own engines (one per GPU); the report is one process's"},
		distTimeoutFlag("with --nproc: longest a rank may run on after another finished its share; then it is stopped as hung and named"),
		deterministicFlag(),
		&ucli.BoolFlag{Name: "check-determinism", Usage: "run the debate twice, as the other flags say, in OUT/check-1/run and OUT/check-2/run, and say whether every output agrees byte for byte or where it first differs (file, line, field)"},
	}, append(append(append(append(samplingFlags(), llamaFlags()...), syntheticFlags()...), verifierFlags()...), debatePromptFlags()...)...)
}

func debateCmd(c *ucli.Context) error {
	d, err := debateFromFlags(c)
	if err != nil {
		return err
	}
	if c.Bool("check-determinism") {
		return run.CheckDebateDeterminism(context.Background(), d)
	}
	return d.Run(context.Background())
}

// debateFromFlags is the run the flags describe: --recipe's values for the flags not
// given, then every setting, resolved and checked.
func debateFromFlags(c *ucli.Context) (run.Debate, error) {
	r := newDebateRequest()
	if err := debateKeys.fromFlags(c, r, r.given); err != nil {
		return run.Debate{}, err
	}
	r.Command, r.RankCommand = notedCommand(c), commandLine(c) // as given, before the recipe sets flags
	r.Stdout, r.Stderr = c.App.Writer, c.App.ErrWriter
	return r.resolve()
}

// resolve is the run the request describes: --recipe's values for the settings not
// given, then every setting, resolved and checked.
func (r *debateRequest) resolve() (run.Debate, error) {
	k := typed[dr]{keys: debateKeys, value: r, given: r.given}
	rec, err := applyRecipe(k, "debate", "")
	if err != nil {
		return run.Debate{}, err
	}
	d := r.Debate
	s := &d.Settings
	s.Recipe = rec
	if err := r.problems(s); err != nil {
		return d, err
	}
	if s.Agents, err = r.agents(); err != nil {
		return d, err
	}
	if s.Seeds, err = r.seeds(); err != nil {
		return d, err
	}
	if err := run.ParseDebateStop(r.Stop, s); err != nil {
		return d, err
	}
	d.CtxGiven, d.PromptLimitGiven = r.given["ctx"], r.given["prompt-limit"]
	var note strings.Builder
	writeRecipe(&note, rec, k, false)
	d.Note = note.String()
	if err := checkThreads("threads", d.Threads); err != nil {
		return d, err
	}
	if d.Placement, err = placeEngines(r.GPULayers, r.given["gpu-layers"], r.Devices); err != nil {
		return d, err
	}
	d.Resolve()
	return d, d.Check()
}

// problems sets the problems' source: --data's file, or the built-in set; and
// --verifier's model and template, made absolute.
func (r *debateRequest) problems(s *run.DebateSettings) error {
	if s.Data == "" {
		set := r.Synthetic
		if r.Task != data.TaskArithmetic {
			set.Task = r.Task // the default stays unrecorded, so earlier runs' configs still match
		}
		s.SyntheticSet = &set
	} else {
		s.Synthetic, s.SyntheticSet, s.SyntheticSeed = 0, nil, 0 // the built-in set's, unrecorded
		if abs, err := filepath.Abs(s.Data); err == nil {
			s.Data = abs
		}
	}
	if err := checkVerifier(r.Verifier, r.VerifierPrompt, s.VerifierBudget, r.given["verifier-budget"] || r.given["verifier-prompt"]); err != nil {
		return err
	}
	if r.Verifier == "" {
		s.VerifierBudget = 0
		return nil
	}
	var err error
	if s.Verifier, err = filepath.Abs(r.Verifier); err != nil {
		return err
	}
	s.VerifierPrompt, err = filepath.Abs(r.VerifierPrompt)
	return err
}

// agents reads --agent: GGUF models, or agents of a training run's checkpoint.
func (r *debateRequest) agents() ([]run.DebateAgent, error) {
	var agents []run.DebateAgent
	for i, spec := range r.Agents {
		a, err := parseAgent(spec, i, r.Agent, nil)
		if err != nil {
			return nil, err
		}
		if a.Adapter != "" {
			return nil, fmt.Errorf("--agent %q: adapter= is for umad train; debate a merged model (umad convert lora2hf, then hf2gguf)", spec)
		}
		agents = append(agents, run.DebateAgent{Name: a.Name, Model: a.Model, ChatFormat: a.ChatFormat, Params: a.Params,
			MaxTokens: a.MaxTokens, SeedOffset: a.SeedOffset})
	}
	return agents, nil
}

// seeds reads --seeds, or --seed as one seed.
func (r *debateRequest) seeds() ([]uint64, error) {
	if !r.given["seed"] {
		return run.ParseDebateSeeds(r.Seeds)
	}
	if r.given["seeds"] {
		return nil, errors.New("give --seed or --seeds, not both")
	}
	return []uint64{r.Seed}, nil
}
