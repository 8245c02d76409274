package cli

import (
	"context"

	ucli "github.com/urfave/cli/v2"

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
		&ucli.StringFlag{Name: "seeds", Value: run.SeedsText(s.Seeds), Usage: "evaluation seeds, comma-separated; mean and std over them are reported"},
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
	r := run.NewDebateRequest()
	if err := fromFlags(c, r.Keys()); err != nil {
		return run.Debate{}, err
	}
	r.Command, r.RankCommand = notedCommand(c), commandLine(c) // as given, before the recipe sets flags
	r.Stdout, r.Stderr = c.App.Writer, c.App.ErrWriter
	return r.Resolve()
}
