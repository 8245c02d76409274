package bench

// The measurements as umad bench runs them: on the models it is given, or on tiny models it
// generates for the run, each printed as its section of bench/RESULTS.md.

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/umad-dev/umad/chat"
	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/model"
	"github.com/umad-dev/umad/sampler"
)

// sampling is what every measured engine samples with, as the sections state.
var sampling = sampler.Params{Temperature: 0.6, TopP: 0.95}

// Report is where a measurement's section goes: to the writer, and into a results file.
type Report struct {
	Command string // the command line the section names
	Results string // a Markdown file whose section Section is rewritten ("": none)
	Section string
}

// write prints body and rewrites the results file's section with it.
func (r Report) write(w io.Writer, body string) error {
	fmt.Fprint(w, body)
	if r.Results == "" {
		return nil
	}
	return UpdateSection(r.Results, r.Section, body)
}

// RolloutRun is umad bench rollout: the engine against a bare loop (Rollout) on a given
// model, or on generated ones: a tiny qwen2, and as asked one with BigVocab's vocabulary and
// one of Preset's real shape, both decoding BigBatch samples together.
type RolloutRun struct {
	Model        string // a GGUF; "" generates the models
	K            int    // samples decoded together on Model or the tiny qwen2
	MaxTokens    int    // tokens per sample, but on the preset's model
	PromptTokens int
	BigVocab     int    // 0: no big-vocabulary model
	BigBatch     int    // samples decoded together on the big-vocabulary and preset models
	Preset       string // a name of model.Presets, or "" for none
	PresetTokens int    // tokens per sample on the preset's model
	Threads      int    // llama.cpp threads; 0: the physical cores
	GPULayers    int
	Repeats      int // best of this many runs
	Report
}

// rolloutModel is one model a RolloutRun measures: its label, GGUF, batch and tokens per
// sample.
type rolloutModel struct {
	label  string
	path   string
	k      int
	tokens int
}

// Run measures each model and writes the section to w (and the results file).
func (r RolloutRun) Run(w io.Writer) error {
	device := Device(r.GPULayers)
	models := []rolloutModel{{filepath.Base(r.Model), r.Model, r.K, r.MaxTokens}}
	if r.Model == "" {
		dir, err := os.MkdirTemp("", "umad-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		if models, err = r.generate(dir); err != nil {
			return err
		}
	}
	var rows []string
	for _, m := range models {
		f, err := Rollout(m.path, RolloutConfig{
			K: m.k, PromptTokens: r.PromptTokens, MaxTokens: m.tokens, Threads: r.Threads,
			GPULayers: r.GPULayers, Params: sampling, Repeats: r.Repeats,
		})
		if err != nil {
			return fmt.Errorf("%s: %w", m.label, err)
		}
		rows = append(rows, "| "+m.label+" "+f.String())
	}
	return r.write(w, RolloutSection(device, r.Threads, r.Repeats, r.Command, rows))
}

// generate writes the generated models into dir.
func (r RolloutRun) generate(dir string) ([]rolloutModel, error) {
	tiny, err := writeTiny(dir, "tiny", model.TinyOptions{Arch: "qwen2", Seed: 1})
	if err != nil {
		return nil, err
	}
	models := []rolloutModel{{"tiny qwen2", tiny, r.K, r.MaxTokens}}
	if r.BigVocab > 0 {
		big, err := writeTiny(dir, "big", model.TinyOptions{Arch: "qwen2", Seed: 1, VocabSize: r.BigVocab})
		if err != nil {
			return nil, err
		}
		models = append(models, rolloutModel{fmt.Sprintf("tiny qwen2, vocab %d", r.BigVocab), big, r.BigBatch, r.MaxTokens})
	}
	if r.Preset != "" {
		shape, ok := model.Presets[r.Preset]
		if !ok {
			return nil, fmt.Errorf("unknown preset %q", r.Preset)
		}
		preset, err := writeTiny(dir, "preset", model.TinyOptions{Shape: &shape, Seed: 1})
		if err != nil {
			return nil, err
		}
		models = append(models, rolloutModel{"random " + r.Preset, preset, r.BigBatch, r.PresetTokens})
	}
	return models, nil
}

// DebateRun is umad bench debate: Debate, sampling as the section states, on the given
// agents (labelled by their paths unless Labels are set) or, without any, both agents on
// one generated tiny qwen2 model.
type DebateRun struct {
	DebateConfig      // its Params are the section's
	TwoModels    bool // with generated models: the second agent gets one of its own
	Report
}

// Run debates, measures the bare loops and writes the section to w (and the results file).
func (r DebateRun) Run(w io.Writer) error {
	cfg := r.DebateConfig
	cfg.Params = sampling
	if len(cfg.Agents) == 0 {
		dir, err := os.MkdirTemp("", "umad-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		if cfg.Agents, cfg.Labels, err = r.generate(dir); err != nil {
			return err
		}
	} else if len(cfg.Labels) == 0 {
		cfg.Labels = cfg.Agents
	}
	f, err := Debate(cfg)
	if err != nil {
		return err
	}
	return r.write(w, DebateSection(r.Command, f))
}

// generate writes the agents' tiny qwen2 models into dir: one for both, or one each.
func (r DebateRun) generate(dir string) (agents, labels []string, err error) {
	for i := range 2 {
		if i == 1 && !r.TwoModels {
			return append(agents, agents[0]), append(labels, labels[0]), nil
		}
		seed := uint64(i + 1)
		p, err := writeTiny(dir, fmt.Sprint(i), model.TinyOptions{Arch: "qwen2", Seed: seed})
		if err != nil {
			return nil, nil, err
		}
		agents, labels = append(agents, p), append(labels, fmt.Sprintf("tiny qwen2 (seed %d)", seed))
	}
	return agents, labels, nil
}

// writeTiny writes a tiny model with Qwen2.5's chat template into dir/name and returns its
// GGUF.
func writeTiny(dir, name string, opt model.TinyOptions) (string, error) {
	opt.ChatTemplate, _ = chat.Template(chat.Qwen25)
	p := filepath.Join(dir, name)
	if err := model.WriteTiny(p, opt); err != nil {
		return "", err
	}
	return filepath.Join(p, "model.gguf"), nil
}

// Device names where the engine decodes: the CPU, or the GPU with layers offloaded.
func Device(layers int) string {
	if layers > 0 {
		for _, d := range engine.Devices() {
			if d.Kind == "gpu" {
				return fmt.Sprintf("GPU %s, %d layers offloaded", d.Description, layers)
			}
		}
	}
	return "CPU"
}
