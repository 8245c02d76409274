package cli

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/debate"
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
		Flags: append([]ucli.Flag{
			&ucli.StringSliceFlag{Name: "agent", Aliases: []string{"a"}, Usage: "agent: GGUF path[,key=value...] (repeat per agent); RUN,agent=I debates agent I of training run RUN's newest checkpoint", Required: true},
			&ucli.StringFlag{Name: "data", Aliases: []string{"d"}, Usage: "problem set file or folder (default: built-in synthetic set)"},
			recipeFlag(),
			&ucli.IntFlag{Name: "synthetic", Value: 20, Usage: "problems of the built-in set, when --data is not given"},
			&ucli.IntFlag{Name: "limit", Usage: "debate at most this many problems (0 = all)"},
			&ucli.Float64Flag{Name: "sample-ratio", Usage: "debate a seeded random share of the problems (0 = all)"},
			&ucli.IntFlag{Name: "k", Value: 4, Usage: "trajectories per problem (--protocol probe: samples per agent and turn)"},
			&ucli.StringFlag{Name: "protocol", Value: string(debate.Trajectories), Usage: "trajectories (K debates per problem, the UMAD reference's) or probe (the paper's Algorithm 1: one debate, K samples per agent and turn from its context)"},
			&ucli.StringFlag{Name: "continue", Value: "sample", Usage: "with --protocol probe: each agent's response that continues the debate is sampled with its settings (sample) or greedy"},
			&ucli.IntFlag{Name: "turns", Value: 3, Usage: "turns T: the first answer plus T-1 debate rounds"},
			&ucli.StringFlag{Name: "seeds", Value: "1", Usage: "evaluation seeds, comma-separated; mean and std over them are reported"},
			&ucli.IntFlag{Name: "prompt-limit", Value: 5120, Usage: "most prompt tokens; longer debate prompts trim the peers' reasoning from the left"},
			&ucli.StringSliceFlag{Name: "stop", Usage: "adaptive stopping: agree=R (all agents agreed R turns in a row) or eu=X (EU below X)"},
			&ucli.IntFlag{Name: "slots", Value: 16, Usage: "parallel sequences per model"},
			&ucli.StringFlag{Name: "out", Aliases: []string{"o"}, Usage: "run directory", Required: true},
			&ucli.IntFlag{Name: "nproc", Value: 1, Usage: "processes on this machine, each debating a share of the problems with its own engines (one per GPU); the report is one process's"},
			distTimeoutFlag("with --nproc: longest a rank may run on after another finished its share; then it is stopped as hung and named"),
			deterministicFlag(),
			&ucli.BoolFlag{Name: "check-determinism", Usage: "run the debate twice, as the other flags say, in OUT/check-1/run and OUT/check-2/run, and say whether every output agrees byte for byte or where it first differs (file, line, field)"},
		}, append(append(append(append(samplingFlags(), llamaFlags()...), syntheticFlags()...), verifierFlags()...), debatePromptFlags()...)...),
		Action: debateCmd,
	})
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
	command := notedCommand(c) // as given, before the recipe sets flags
	rec, err := applyRecipe(c, "debate", "")
	if err != nil {
		return run.Debate{}, err
	}
	s := run.DebateSettings{Recipe: rec, Data: c.String("data"), Limit: c.Int("limit"), SampleRatio: c.Float64("sample-ratio"),
		K: c.Int("k"), Turns: c.Int("turns"), PromptLimit: c.Int("prompt-limit"), Mask: !c.Bool("no-mask"),
		FullHistory: c.Bool("full-history"), Anonymise: c.Bool("anonymise"), Protocol: c.String("protocol"),
		KVType: c.String("kv-type"), FlashAttn: c.String("flash-attn"), Ctx: c.Int("ctx"), Deterministic: c.Bool("deterministic")}
	if c.IsSet("continue") {
		s.Continue = c.String("continue")
	}
	if err := debateData(c, &s); err != nil {
		return run.Debate{}, err
	}
	if s.Agents, err = debateAgents(c); err != nil {
		return run.Debate{}, err
	}
	if s.Seeds, err = debateSeeds(c); err != nil {
		return run.Debate{}, err
	}
	if err := run.ParseDebateStop(c.StringSlice("stop"), &s); err != nil {
		return run.Debate{}, err
	}
	d := run.Debate{Settings: s, Out: c.String("out"), CtxGiven: c.IsSet("ctx"), PromptLimitGiven: c.IsSet("prompt-limit"),
		Threads: c.Int("threads"), Slots: c.Int("slots"), NProc: c.Int("nproc"), DistTimeout: c.Duration("dist-timeout"),
		Command: command, RankCommand: commandLine(c), Stdout: c.App.Writer, Stderr: c.App.ErrWriter}
	var note strings.Builder
	writeRecipe(&note, rec, c)
	d.Note = note.String()
	if err := checkThreads("threads", d.Threads); err != nil {
		return d, err
	}
	if d.Placement, err = placement(c); err != nil {
		return d, err
	}
	d.Resolve()
	return d, d.Check()
}

// debateData reads the problems' source: --data's file, or the built-in set; and
// --verifier's model and template, made absolute.
func debateData(c *ucli.Context, s *run.DebateSettings) error {
	if s.Data == "" {
		s.Synthetic = c.Int("synthetic")
		set := syntheticSet(c)
		s.SyntheticSet, s.SyntheticSeed = &set, c.Uint64("synthetic-seed")
	} else if abs, err := filepath.Abs(s.Data); err == nil {
		s.Data = abs
	}
	if err := checkVerifierFlags(c); err != nil {
		return err
	}
	if c.String("verifier") != "" {
		var err error
		if s.Verifier, err = filepath.Abs(c.String("verifier")); err != nil {
			return err
		}
		if s.VerifierPrompt, err = filepath.Abs(c.String("verifier-prompt")); err != nil {
			return err
		}
		s.VerifierBudget = c.Duration("verifier-budget")
	}
	return nil
}

// debateAgents reads --agent: GGUF models, or agents of a training run's checkpoint.
func debateAgents(c *ucli.Context) ([]run.DebateAgent, error) {
	var agents []run.DebateAgent
	for i, spec := range c.StringSlice("agent") {
		a, err := parseAgent(spec, i, c, true)
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

// debateSeeds reads --seeds, or --seed as one seed.
func debateSeeds(c *ucli.Context) ([]uint64, error) {
	if !c.IsSet("seed") {
		return run.ParseDebateSeeds(c.String("seeds"))
	}
	if c.IsSet("seeds") {
		return nil, errors.New("give --seed or --seeds, not both")
	}
	return []uint64{c.Uint64("seed")}, nil
}
