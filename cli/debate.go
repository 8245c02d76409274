package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/data"
	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/evalrun"
	"github.com/umad-dev/umad/internal/runlock"
	"github.com/umad-dev/umad/launch"
	"github.com/umad-dev/umad/report"
	"github.com/umad-dev/umad/uncertainty"
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
			&ucli.StringFlag{Name: "protocol", Value: string(engine.Trajectories), Usage: "trajectories (K debates per problem, the UMAD reference's) or probe (the paper's Algorithm 1: one debate, K samples per agent and turn from its context)"},
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

// debateConfig is the resolved configuration, saved as config.json so that a run can be
// reproduced and resumed only with the same settings.
type debateConfig struct {
	Agents    []agentSpec `json:"agents"`
	Data      string      `json:"data"`
	Synthetic int         `json:"synthetic,omitempty"`
	// SyntheticSet is the difficulty of the built-in problems, when Data is empty.
	SyntheticSet  *data.SyntheticConfig `json:"synthetic_set,omitempty"`
	SyntheticSeed uint64                `json:"synthetic_seed,omitempty"`
	Limit         int                   `json:"limit,omitempty"`
	SampleRatio   float64               `json:"sample_ratio,omitempty"`
	K             int                   `json:"k"`
	Protocol      string                `json:"protocol"`
	Continue      string                `json:"continue,omitempty"` // probe's continuations: sample or greedy
	Turns         int                   `json:"turns"`
	Seeds         []uint64              `json:"seeds"`
	PromptLimit   int                   `json:"prompt_limit"`
	Mask          bool                  `json:"mask"`
	FullHistory   bool                  `json:"full_history"`
	Anonymise     bool                  `json:"anonymise"`
	StopAgree     int                   `json:"stop_agree,omitempty"`
	StopEU        float64               `json:"stop_eu,omitempty"`
	KVType        string                `json:"kv_type"`
	FlashAttn     string                `json:"flash_attn"`
	Ctx           int                   `json:"ctx"`
	Deterministic bool                  `json:"deterministic,omitempty"`
	// Verifier and VerifierPrompt are --verifier's model and template, absolute.
	Verifier       string        `json:"verifier,omitempty"`
	VerifierPrompt string        `json:"verifier_prompt,omitempty"`
	VerifierBudget time.Duration `json:"verifier_budget,omitempty"`
	Recipe         *recipeRun    `json:"recipe,omitempty"`
}

// UnmarshalJSON reads a config.json; one written before --protocol existed is a run of
// the trajectories protocol (so it resumes).
func (cfg *debateConfig) UnmarshalJSON(b []byte) error {
	type plain debateConfig
	p := plain{Protocol: string(engine.Trajectories)}
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*cfg = debateConfig(p)
	return nil
}

// protocolText names the run's protocol in its report.
func (cfg debateConfig) protocolText() string {
	if engine.Protocol(cfg.Protocol) == engine.Probe {
		how := "sampled"
		if cfg.Continue == "greedy" {
			how = "greedy"
		}
		return fmt.Sprintf("probe (the paper's Algorithm 1): at each turn, K = %d samples per agent from one context give the "+
			"answer distributions; one %s continuation per agent forms the next turn's context. Flips pair samples by index "+
			"across turns, which here are independent draws, not one trajectory", cfg.K, how)
	}
	return fmt.Sprintf("trajectories (the UMAD reference's): K = %d debates per problem, sample k of every turn continuing trajectory k", cfg.K)
}

// resolveProtocol checks --protocol and --continue against -k.
func resolveProtocol(c *ucli.Context, cfg *debateConfig) error {
	cfg.Protocol = c.String("protocol")
	switch engine.Protocol(cfg.Protocol) {
	case engine.Trajectories:
		if c.IsSet("continue") {
			return errors.New("--continue chooses the probe protocol's continuations; add --protocol probe")
		}
	case engine.Probe:
		if cfg.K < 2 {
			return fmt.Errorf("--protocol probe estimates each turn's answer distributions from K samples per agent; -k must be at least 2, got %d", cfg.K)
		}
		cfg.Continue = c.String("continue")
		if cfg.Continue != "sample" && cfg.Continue != "greedy" {
			return fmt.Errorf("--continue %q: want sample or greedy", cfg.Continue)
		}
	default:
		return fmt.Errorf("--protocol %q: want one of %v", cfg.Protocol, engine.Protocols)
	}
	return nil
}

func resolveDebate(c *ucli.Context) (debateConfig, error) {
	rec, err := applyRecipe(c, "debate", "")
	if err != nil {
		return debateConfig{}, err
	}
	cfg := debateConfig{Recipe: rec, Data: c.String("data"), Limit: c.Int("limit"), SampleRatio: c.Float64("sample-ratio"),
		K: c.Int("k"), Turns: c.Int("turns"), PromptLimit: c.Int("prompt-limit"), Mask: !c.Bool("no-mask"),
		FullHistory: c.Bool("full-history"), Anonymise: c.Bool("anonymise"),
		KVType: c.String("kv-type"), FlashAttn: c.String("flash-attn"), Ctx: c.Int("ctx"),
		Deterministic: c.Bool("deterministic")}
	if err := resolveDebateData(c, &cfg); err != nil {
		return cfg, err
	}
	switch {
	case cfg.K < 1:
		return cfg, fmt.Errorf("-k must be at least 1, got %d", cfg.K)
	case cfg.Turns < 1:
		return cfg, fmt.Errorf("--turns must be at least 1, got %d", cfg.Turns)
	case cfg.PromptLimit < 1:
		return cfg, fmt.Errorf("--prompt-limit must be positive")
	}
	if err := resolveProtocol(c, &cfg); err != nil {
		return cfg, err
	}
	if err := resolveDebateAgents(c, &cfg); err != nil {
		return cfg, err
	}
	if cfg.Seeds, err = parseSeeds(c); err != nil {
		return cfg, err
	}
	if err := parseStop(c, &cfg); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// resolveDebateData takes the problems' source: --data's file, or the built-in set; and
// --verifier's model and template, made absolute.
func resolveDebateData(c *ucli.Context, cfg *debateConfig) error {
	if cfg.Data == "" {
		if c.IsSet("limit") || c.IsSet("sample-ratio") {
			return errors.New("--limit and --sample-ratio choose among the problems of --data; the built-in set's size is --synthetic N")
		}
		if err := checkSynthetic(c); err != nil {
			return err
		}
		cfg.Synthetic = c.Int("synthetic")
		set := syntheticSet(c)
		cfg.SyntheticSet, cfg.SyntheticSeed = &set, c.Uint64("synthetic-seed")
	} else if abs, err := filepath.Abs(cfg.Data); err == nil {
		cfg.Data = abs
	}
	if err := checkVerifierFlags(c); err != nil {
		return err
	}
	if c.String("verifier") != "" {
		var err error
		if cfg.Verifier, err = filepath.Abs(c.String("verifier")); err != nil {
			return err
		}
		if cfg.VerifierPrompt, err = filepath.Abs(c.String("verifier-prompt")); err != nil {
			return err
		}
		cfg.VerifierBudget = c.Duration("verifier-budget")
	}
	return nil
}

// resolveDebateAgents reads the agents and sizes the context for the longest prompt plus
// the longest response, unless --ctx says.
func resolveDebateAgents(c *ucli.Context, cfg *debateConfig) error {
	for i, spec := range c.StringSlice("agent") {
		a, err := parseAgent(spec, i, c, true)
		if err != nil {
			return err
		}
		if a.Adapter != "" {
			return fmt.Errorf("--agent %q: adapter= is for umad train; debate a merged model (umad convert lora2hf, then hf2gguf)", spec)
		}
		cfg.Agents = append(cfg.Agents, a)
	}
	if !c.IsSet("ctx") {
		// Room for the longest prompt plus the longest response.
		cfg.Ctx = cfg.PromptLimit
		for _, a := range cfg.Agents {
			cfg.Ctx = max(cfg.Ctx, cfg.PromptLimit+a.MaxTokens)
		}
	}
	return nil
}

// parseSeeds reads --seeds, or --seed as one seed.
func parseSeeds(c *ucli.Context) ([]uint64, error) {
	var list []uint64
	seeds := c.String("seeds")
	if c.IsSet("seed") {
		if c.IsSet("seeds") {
			return nil, errors.New("give --seed or --seeds, not both")
		}
		seeds = strconv.FormatUint(c.Uint64("seed"), 10)
	}
	for _, s := range strings.Split(seeds, ",") {
		v, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("--seeds %q: %w", c.String("seeds"), err)
		}
		if slices.Contains(list, v) {
			return nil, fmt.Errorf("--seeds: seed %d given twice", v)
		}
		list = append(list, v)
	}
	return list, nil
}

// parseStop reads --stop's adaptive-stopping rules.
func parseStop(c *ucli.Context, cfg *debateConfig) error {
	for _, s := range c.StringSlice("stop") {
		k, v, _ := strings.Cut(s, "=")
		var err error
		switch k {
		case "agree":
			cfg.StopAgree, err = strconv.Atoi(v)
			if err == nil && cfg.StopAgree < 1 {
				err = errors.New("want at least 1")
			}
		case "eu":
			cfg.StopEU, err = strconv.ParseFloat(v, 64)
			if err == nil && !(cfg.StopEU > 0 && !math.IsInf(cfg.StopEU, 1)) {
				err = errors.New("want a finite positive threshold")
			}
		default:
			err = errors.New("want agree=R or eu=X")
		}
		if err != nil {
			return fmt.Errorf("--stop %q: %w", s, err)
		}
	}
	return nil
}

// checkPromptFloor refuses a --prompt-limit that a turn-1 prompt cannot fit even with
// every response emptied (engine.CheckPromptFloor), with each model's tokenizer alone,
// before anything loads: the debate failed at turn 1.
func (cfg debateConfig) checkPromptFloor(problems []data.Problem) error {
	if cfg.Turns < 2 {
		return nil
	}
	agents := make([]engine.FloorAgent, len(cfg.Agents))
	for i, a := range cfg.Agents {
		m, err := engine.OpenVocab(a.Model)
		if err != nil {
			return err
		}
		defer m.Close()
		if agents[i].Format, err = m.Format(a.ChatFormat); err != nil {
			return err
		}
		agents[i].Model = m
	}
	return engine.CheckPromptFloor(agents, problems, cfg.debate(nil).Prompt, cfg.PromptLimit)
}

func (cfg debateConfig) problems() ([]data.Problem, error) {
	if cfg.Data == "" {
		return data.SyntheticWith(cfg.Synthetic, cfg.SyntheticSeed, *cfg.SyntheticSet)
	}
	ps, err := data.Load(cfg.Data, data.Options{Limit: cfg.Limit, SampleRatio: cfg.SampleRatio, Seed: 1})
	if err != nil {
		return nil, err
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("%s: no valid problems", cfg.Data)
	}
	return ps, nil
}

func debateCmd(c *ucli.Context) error {
	if c.Bool("check-determinism") {
		return checkDeterminism(c)
	}
	if v := launch.JobRank(); v != "" && !launch.OwnRank() {
		return fmt.Errorf("%s is set (by torchrun, srun or a job system?), but umad debate starts its own ranks with --nproc N and merges their shares into one report; run it once per job (srun -n 1), without RANK",
			v)
	}
	d, isRank, err := resolveDist(c, false)
	if err != nil {
		return err
	}
	cfg, err := resolveDebate(c)
	if err != nil {
		return err
	}
	if !isRank { // the launcher's ranks run the same command
		cfg.Recipe.write(c.App.ErrWriter, c)
	}
	problems, err := cfg.problems()
	if err != nil {
		return err
	}
	if err := cfg.checkPromptFloor(problems); err != nil {
		return err
	}
	out, err := outDir(c)
	if err != nil {
		return err
	}
	if isRank { // the launcher's ranks write only their own rollout files
		return debateRun(c, cfg, problems, out, d, true, func() error { return nil })
	}
	lock, err := runlock.Dir(out)
	if err != nil {
		return err
	}
	defer lock.Release()
	save, err := claimRunDir(out, cfg)
	if err != nil {
		return err
	}
	save = recordCommand(c, out, save)
	if err := evalrun.Merge(out, cfg.Seeds); err != nil { // a stopped multi-process run's
		return err
	}
	if d.Multi() {
		if err := save(); err != nil {
			return err
		}
		if err := evalrun.Launch(out, cfg.Seeds, d, rankOutput(c)); err != nil {
			return err
		}
		return writeDebateReport(c, out)
	}
	return debateRun(c, cfg, problems, out, d, false, save)
}

// debateRun debates this process's part of the problems (all of them, or a rank's share)
// into out, after save has saved the configuration; a one-process run then writes the
// report (a rank leaves it to its launcher).
func debateRun(c *ucli.Context, cfg debateConfig, problems []data.Problem, out string, d launch.Spec, isRank bool, save func() error) error {
	distinct := map[string]bool{}
	for _, a := range cfg.Agents {
		distinct[a.Model] = true
	}
	if err := shareCores(c, d, len(distinct), false); err != nil {
		return err
	}
	agents, servers, err := openAgents(c, cfg)
	if err != nil {
		return err
	}
	defer closeServers(servers)
	check, err := openRunVerifier(c, c.Int("threads"))
	if err != nil {
		return err
	}
	defer check.Close()
	if err := save(); err != nil {
		return err
	}
	ctx, release := interruptContext("")
	defer release()
	run := evalrun.Run{Debate: cfg.debate(agents), Problems: problems, Part: evalrun.Part{Rank: d.Rank, World: d.World}, Progress: os.Stderr}
	for _, a := range cfg.Agents {
		run.SeedOffsets = append(run.SeedOffsets, a.SeedOffset)
	}
	if check != nil {
		run.Check = func(recs []engine.DebateRecord) error { return check.Records(ctx, recs) }
	}
	if err := run.Seeds(ctx, out, cfg.Seeds); err != nil {
		return err
	}
	if check != nil {
		fmt.Fprintf(c.App.ErrWriter, "verifier: %s\n", check.Done())
	}
	if isRank {
		return nil // the launcher merges and reports
	}
	printSharing(c, servers)
	return writeDebateReport(c, out)
}

// writeDebateReport writes a run's report from its rollouts.
func writeDebateReport(c *ucli.Context, out string) error {
	if _, err := rebuildReport(out); err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "report: %s\n", filepath.Join(out, "report", report.ReportFile))
	return nil
}

// debate is the debate of every seed (evalrun.Run sets the seeds).
func (cfg debateConfig) debate(agents []engine.DebateAgent) engine.DebateConfig {
	dcfg := engine.DebateConfig{Agents: agents, Turns: cfg.Turns, K: cfg.K, PromptLimit: cfg.PromptLimit,
		Protocol: engine.Protocol(cfg.Protocol), GreedyContinuation: cfg.Continue == "greedy",
		StopAgree: cfg.StopAgree, StopEU: cfg.StopEU, EU: uncertainty.TurnEU, Deterministic: cfg.Deterministic,
		Prompt: engine.DebatePrompt{KeepAnswers: !cfg.Mask, Anonymise: cfg.Anonymise}}
	if cfg.FullHistory {
		dcfg.Prompt.History = engine.HistoryFull
	}
	return dcfg
}

// printSharing says how many prompt tokens the engines' shared prefixes saved.
func printSharing(c *ucli.Context, servers map[string]*engine.Server) {
	var decoded, naive int64
	for _, srv := range servers {
		st := srv.Engine.Stats()
		decoded, naive = decoded+st.PromptTokens, naive+st.NaivePromptTokens
	}
	if naive > 0 { // nothing was generated when a resumed run had every problem done
		fmt.Fprintf(c.App.ErrWriter, "prompt tokens: %d decoded of %d, %.1f%% shared\n", decoded, naive, 100*(1-float64(decoded)/float64(naive)))
	}
}

// openAgents loads each distinct model once, as a server with its own engine, and returns
// the agents on them and the servers (for closeServers). Context lengths are checked
// against the models before an engine allocates its KV cache.
func openAgents(c *ucli.Context, cfg debateConfig) ([]engine.DebateAgent, map[string]*engine.Server, error) {
	servers := map[string]*engine.Server{}
	fail := func(err error) ([]engine.DebateAgent, map[string]*engine.Server, error) {
		closeServers(servers)
		return nil, nil, err
	}
	distinct := map[string]bool{}
	for _, a := range cfg.Agents {
		distinct[a.Model] = true
	}
	opt, err := engineOptions(c, c.Int("slots"))
	if err != nil {
		return nil, nil, err
	}
	opt.SeqContext = cfg.Ctx
	if opt.Threads == 0 && len(distinct) > 1 {
		opt.Threads = engine.SharedThreads(len(distinct)) // the engines decode concurrently
	}
	place, err := placement(c)
	if err != nil {
		return nil, nil, err
	}
	var agents []engine.DebateAgent
	for _, a := range cfg.Agents {
		srv := servers[a.Model]
		if srv == nil {
			m, err := engine.OpenModel(a.Model, place)
			if err != nil {
				return fail(err)
			}
			srv = &engine.Server{Model: m}
			servers[a.Model] = srv
			for _, b := range cfg.Agents {
				if b.Model != a.Model {
					continue
				}
				if err := checkLengths(c, b.MaxTokens, m.TrainedContext(), m.Path()); err != nil {
					return fail(err)
				}
			}
			what := "--ctx"
			if !c.IsSet("ctx") {
				what = "--prompt-limit + --max-tokens"
			} else if err := checkContext("--ctx", opt.SeqContext, m.TrainedContext(), m.Path()); err != nil {
				return fail(err)
			}
			if srv.Engine, err = newEngine(m, opt, what); err != nil {
				return fail(err)
			}
		}
		f, err := srv.Format(a.ChatFormat)
		if err != nil {
			return fail(err)
		}
		agents = append(agents, engine.DebateAgent{Name: a.Name, Generator: srv.Engine, Format: f, Params: a.Params, MaxTokens: a.MaxTokens})
	}
	return agents, servers, nil
}

func closeServers(servers map[string]*engine.Server) {
	for _, srv := range servers {
		srv.Close()
	}
}
