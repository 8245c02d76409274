package trainer

// The weight-sync phase: the actor's weights go to llama.cpp, written into the loaded
// model (in place) or as a GGUF file that the agent's server reloads, and a fixed probe
// checks that llama.cpp and the plugin agree. A LoRA run's in-place sync sends the adapters
// alone: llama.cpp holds the frozen base and applies them as a LoRA GGUF.

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/umad-dev/umad/chat"
	"github.com/umad-dev/umad/debate"
	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/gguf"
	"github.com/umad-dev/umad/hfmodel"
	"github.com/umad-dev/umad/model"
	"github.com/umad-dev/umad/safetensors"
)

// RolloutDType is the type of the rollout model's weight matrices in llama.cpp: the sync
// converts the trainer's f32 weights to it on the way in. bf16 and f16 halve the bytes a
// decode step reads, at a log-prob gap to the trainer that truncated importance sampling
// corrects.
type RolloutDType string

// Rollout dtypes.
const (
	RolloutF32  RolloutDType = "f32"
	RolloutBF16 RolloutDType = "bf16"
	RolloutF16  RolloutDType = "f16"
)

var rolloutTypes = map[RolloutDType]gguf.GGMLType{RolloutF32: gguf.TypeF32, RolloutBF16: gguf.TypeBF16, RolloutF16: gguf.TypeF16}

// ParseRolloutDType parses f32, bf16 or f16.
func ParseRolloutDType(s string) (RolloutDType, error) {
	d := RolloutDType(strings.ToLower(s))
	if _, ok := rolloutTypes[d]; !ok {
		return "", fmt.Errorf("unknown rollout dtype %q (want f32, bf16 or f16)", s)
	}
	return d, nil
}

// GGUFType is the dtype's GGML matrix type.
func (d RolloutDType) GGUFType() gguf.GGMLType { return rolloutTypes[d] }

// SyncMode is how the trainer's weights reach llama.cpp after an update.
type SyncMode string

// Weight-sync modes.
const (
	// SyncInPlace writes the weights into the loaded model (engine.Server.UpdateWeights),
	// converted as the GGUF converter would: no file, no reload. A LoRA run's server holds
	// the base and each sync swaps in the adapters as a LoRA GGUF (engine.Server.SetAdapter).
	SyncInPlace SyncMode = "inplace"
	// SyncFile writes a GGUF file (a LoRA run's merged weights) and reloads it: what umad did
	// first, kept for comparison.
	SyncFile SyncMode = "file"
)

// ParseSyncMode parses inplace or file.
func ParseSyncMode(s string) (SyncMode, error) {
	switch m := SyncMode(strings.ToLower(s)); m {
	case SyncInPlace, SyncFile:
		return m, nil
	}
	return "", fmt.Errorf("unknown weight-sync mode %q (want inplace or file)", s)
}

// writeGGUF writes the model's current weights (a LoRA model's merged weights, or its base
// alone when base is set) as a GGUF file for llama.cpp, its matrices of type typ: the weights and the model's config
// and tokenizer files go to an HF directory (staging, reused between calls), which is then
// converted. The GGUF is replaced atomically.
func writeGGUF(m *hfmodel.Model, staging, out string, base bool, typ gguf.GGMLType) error {
	if err := os.MkdirAll(staging, 0o755); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	// config.json too: the converter reads the architecture from it.
	if err := m.WriteSideFiles(staging); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	export := hfmodel.Export
	if base {
		export = hfmodel.ExportBase
	}
	weights, err := export(m.Model)
	if err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	if err := safetensors.Write(filepath.Join(staging, "model.safetensors"), weights, map[string]string{"format": "pt"}); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	return model.HFToGGUF(staging, out, model.HFToGGUFOptions{Type: typ})
}

// syncAll gives every agent's current weights to llama.cpp (the first time, or in file
// mode, through a GGUF its server loads) and checks llama.cpp's log-probs of a fixed probe
// against the plugin's.
func (t *Trainer) syncAll() error {
	for i := range t.agents {
		if _, _, err := t.sync(i); err != nil {
			return fmt.Errorf("agent %d: %w", i, err)
		}
	}
	return nil
}

// sync returns the time it took and the probe's mean |delta log-prob|. With agent groups
// the agent's first rank also sends what its engine got to the engines of the ranks outside
// the group, which take it instead (follow).
func (t *Trainer) sync(i int) (took time.Duration, gap float64, err error) {
	if !t.trains(i) {
		return t.follow(i)
	}
	start := time.Now()
	st := t.agents[i]
	release, err := t.holdWeights(i) // stage 3: the export and the probe read them whole
	if err != nil {
		return 0, 0, fmt.Errorf("sync: %w", err)
	}
	defer func() { err = errors.Join(err, release()) }()
	first := st.server == nil
	var weights []safetensors.TensorView
	if t.adapterSync() {
		if err := t.syncAdapter(i); err != nil {
			return 0, 0, err
		}
	} else if !first && t.cfg.Sync == SyncInPlace {
		if weights, err = hfmodel.Weights(st.actor.Model); err != nil {
			return 0, 0, fmt.Errorf("sync: %w", err)
		}
		if err := st.server.UpdateWeights(weights); err != nil {
			return 0, 0, fmt.Errorf("sync: %w", err)
		}
	} else if err := t.reload(i, false); err != nil {
		return 0, 0, err
	}
	if err := t.serveEngines(i, first, weights); err != nil {
		return 0, 0, fmt.Errorf("sync: send to the other ranks' engines: %w", err)
	}
	if err := t.readyProbe(i); err != nil {
		return 0, 0, err
	}
	took = time.Since(start)
	gap, err = t.checkProbe(i)
	return took, gap, err
}

// readyProbe makes agent i's probe once its server is up.
func (t *Trainer) readyProbe(i int) error {
	st := t.agents[i]
	if st.probe.Prompt != nil {
		return nil
	}
	var err error
	if st.format, err = st.server.Format(t.cfg.Agents[i].ChatFormat); err != nil {
		return err
	}
	st.probe, err = t.makeProbe(st.server, st.format)
	return err
}

// serveEngines sends, from agent i's first rank, what its engine got in a sync to the
// engines of the ranks outside its group (follow): the GGUF its server loaded (first, or
// in file mode), the weights written in place, or the LoRA adapter (after the base GGUF
// the first time).
func (t *Trainer) serveEngines(i int, first bool, weights []safetensors.TensorView) error {
	st := t.agents[i]
	g, root := st.serve, st.serveRoot
	switch {
	case g == nil:
		return nil
	case t.adapterSync():
		if first {
			if err := sendFile(g, root, st.gguf); err != nil {
				return err
			}
		}
		return sendFile(g, root, adapterPath(st))
	case weights != nil:
		return sendWeights(g, root, weights)
	}
	return sendFile(g, root, st.gguf)
}

// follow is sync on a rank outside agent i's group: its engine takes what the group's
// first rank sends (serveEngines), and the probe compares it with the log-probs the
// trainer computed there.
func (t *Trainer) follow(i int) (took time.Duration, gap float64, err error) {
	start := time.Now()
	st := t.agents[i]
	g, root := st.serve, st.serveRoot
	first := st.server == nil
	switch {
	case t.adapterSync():
		if first {
			if err := receiveFile(g, root, st.gguf); err != nil {
				return 0, 0, fmt.Errorf("sync: %w", err)
			}
			if err := t.openServer(i); err != nil {
				return 0, 0, err
			}
		}
		path := adapterPath(st)
		if err := receiveFile(g, root, path); err != nil {
			return 0, 0, fmt.Errorf("sync: %w", err)
		}
		if err := st.server.SetAdapter(path); err != nil {
			return 0, 0, fmt.Errorf("sync: %w", err)
		}
	case !first && t.cfg.Sync == SyncInPlace:
		weights, err := receiveWeights(g, root)
		if err != nil {
			return 0, 0, fmt.Errorf("sync: %w", err)
		}
		if err := st.server.UpdateWeights(weights); err != nil {
			return 0, 0, fmt.Errorf("sync: %w", err)
		}
	default:
		if err := receiveFile(g, root, st.gguf); err != nil {
			return 0, 0, fmt.Errorf("sync: %w", err)
		}
		if err := t.openServer(i); err != nil {
			return 0, 0, err
		}
	}
	if err := t.readyProbe(i); err != nil {
		return 0, 0, err
	}
	took = time.Since(start)
	gap, err = t.checkProbe(i)
	return took, gap, err
}

// adapterSync reports whether syncs send LoRA adapters to a server holding the base.
func (t *Trainer) adapterSync() bool {
	return t.cfg.LoRA.Rank > 0 && t.cfg.Sync == SyncInPlace
}

// syncAdapter writes agent i's adapters as a LoRA GGUF beside its base GGUF and swaps them
// into its server; the first call loads the server on the base weights (even when resuming:
// the trained adapters come in as the adapter, never merged).
func (t *Trainer) syncAdapter(i int) error {
	st := t.agents[i]
	if st.server == nil {
		if err := t.reload(i, true); err != nil {
			return err
		}
		// The base is written once: its staging copy would only take disk.
		if err := os.RemoveAll(stagingDir(st)); err != nil {
			return fmt.Errorf("sync: %w", err)
		}
	}
	sh, err := st.server.Shape()
	if err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	a, err := st.actor.Adapter()
	if err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	path := adapterPath(st)
	if err := a.WriteGGUF(path, sh); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	if err := st.server.SetAdapter(path); err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	return nil
}

// AdapterGGUF is the LoRA GGUF an adapter sync writes beside the agent's base model.gguf.
const AdapterGGUF = "adapter.gguf"

func adapterPath(st *agentState) string { return filepath.Join(filepath.Dir(st.gguf), AdapterGGUF) }

// reload writes agent i's weights (its base alone when base is set) as a GGUF and replaces
// its server with one on that file.
func (t *Trainer) reload(i int, base bool) error {
	st := t.agents[i]
	if err := writeGGUF(st.actor, stagingDir(st), st.gguf, base, t.cfg.RolloutDType.GGUFType()); err != nil {
		return err
	}
	return t.openServer(i)
}

// openServer replaces agent i's server with one on its GGUF.
func (t *Trainer) openServer(i int) error {
	a, st := t.cfg.Agents[i], t.agents[i]
	opt := t.cfg.Rollout.Engine
	if opt.SeqContext == 0 {
		opt.SeqContext = t.cfg.PromptLimit + a.MaxTokens
	}
	srv, err := engine.OpenServer(st.gguf, t.cfg.Rollout.Placement, opt)
	if err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	st.server.Close()
	st.server = srv
	return nil
}

// stagingDir is where agent st's weights are written as an HF directory for the converter.
func stagingDir(st *agentState) string { return filepath.Join(filepath.Dir(st.gguf), "hf") }

// makeProbe is a fixed prompt and response: the first training problem answered in the
// boxed format.
func (t *Trainer) makeProbe(srv *engine.Server, f chat.Format) (Pair, error) {
	p := t.cfg.Problems[0]
	pairs, err := TokenizePairs(srv, f, srv.EndOfTurn(), []TextPair{{Prompt: debate.Turn0Message(p.Question), Response: AnswerResponse(p.Gold)}})
	if err != nil {
		return Pair{}, fmt.Errorf("probe: %w", err)
	}
	return pairs[0], nil
}

// checkProbe compares llama.cpp's log-probs of the probe, under exact settings, with the
// plugin's, and returns the mean |delta|; outside agent i's group, the plugin's are those
// its first rank computed.
func (t *Trainer) checkProbe(i int) (float64, error) {
	st, temp := t.agents[i], t.cfg.Agents[i].Params.Temperature
	ll, err := st.server.ExactLogProbs(st.probe.Prompt, st.probe.Response, temp)
	if err != nil {
		return 0, fmt.Errorf("sync check: %w", err)
	}
	tl := make([]float32, len(st.probe.Response))
	if t.trains(i) {
		lp, _, err := st.actor.LogProbs([][]int32{st.probe.Prompt}, [][]int32{st.probe.Response}, temp)
		if err != nil {
			return 0, fmt.Errorf("sync check: %w", err)
		}
		tl = lp[0]
	}
	if st.serve != nil {
		if err := broadcastFloats(st.serve, st.serveRoot, tl); err != nil {
			return 0, fmt.Errorf("sync check: %w", err)
		}
	}
	gap := meanAbsDiff(ll, tl)
	if math.IsNaN(gap) || math.IsInf(gap, 0) {
		// Checked even with the probe check off: diverged weights must not be checkpointed.
		if t.step == 0 { // no update yet: the weights the run starts from are at fault
			return gap, fmt.Errorf("sync check: the probe's log-probs are %v before any step: the weights of %s are not usable", gap, t.startingWeights(i))
		}
		return gap, fmt.Errorf("sync check: the probe's log-probs are %v: the weights diverged (lower the learning rate?)", gap)
	}
	if t.cfg.ProbeTol > 0 && !(gap <= t.cfg.ProbeTol) {
		return gap, fmt.Errorf("sync check: llama.cpp and the trainer disagree on the probe's log-probs by %.3g (mean |delta|), more than %.3g: llama.cpp does not hold the trained weights", gap, t.cfg.ProbeTol)
	}
	return gap, nil
}

// startingWeights names what agent i starts from.
func (t *Trainer) startingWeights(i int) string {
	if a := t.cfg.Agents[i]; a.Adapter != "" {
		return "the starting adapter " + a.Adapter
	}
	return "the starting model " + t.cfg.Agents[i].Dir
}

// meanAbsDiff is the mean |a-b| over paired values (the log-prob gap).
func meanAbsDiff(a, b []float32) float64 {
	if len(a) == 0 {
		return 0
	}
	var s float64
	for i := range a {
		s += math.Abs(float64(a[i]) - float64(b[i]))
	}
	return s / float64(len(a))
}
