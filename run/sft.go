package run

// umad sft as a typed run: a supervised warm start (SFT, its settings as fields) that
// teaches a model prompt/response pairs. Its output directory is built beside Out and
// renamed into place at the end, so Out holds a whole model or nothing.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/data"
	"github.com/umad-dev/umad/debate"
	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/hfmodel"
	"github.com/umad-dev/umad/internal/runlock"
	"github.com/umad-dev/umad/launch"
	"github.com/umad-dev/umad/model"
	"github.com/umad-dev/umad/trainer"
	"github.com/umad-dev/umad/trainspec"
)

// SFTSettings are what a warm start does. Errors name a setting by its flag (--expert).
type SFTSettings struct {
	Model string // a Hugging Face checkpoint directory
	// The pairs: Data's JSONL, or Synthetic pairs built from the built-in problems
	// (SynthConfig, SynthSeed).
	Data        string
	Synthetic   int
	SynthConfig data.SyntheticConfig
	SynthSeed   uint64
	// Expert is the kind of SynthConfig's experts task this model learns, an index into its
	// Ops (-1: none); NoMask shows the answers in its turn-1 debate messages.
	Expert int
	NoMask bool
	Epochs int
	Batch  int // pairs per optimizer step
	Opt    trainspec.AdamW
	// Seed shuffles the pairs, draws the experts' coins and the adapters' initial weights.
	Seed       uint64
	ChatFormat string // overrides the format detected from the model's chat template
	LoRA       trainspec.LoRA
}

// DefaultSFTSettings are a warm start's settings unless given, the model and pairs aside:
// what umad sft's flags show.
func DefaultSFTSettings() SFTSettings {
	opt := trainspec.DefaultAdamW
	opt.LR = 1e-5
	return SFTSettings{SynthConfig: data.DefaultSynthetic, SynthSeed: 1, Expert: -1, Epochs: 3, Batch: 8, Opt: opt, Seed: 1}
}

// SFT is one `umad sft` run: its settings and where it writes.
type SFT struct {
	Settings SFTSettings
	// Out gets hf/ (the trained checkpoint, LoRA merged), adapter/ (LoRA's PEFT directory)
	// and model.gguf; it must not exist.
	Out string
	// Stdout gets the run's summary, Stderr its progress.
	Stdout, Stderr io.Writer
}

// Claim locks Out, which does not exist until the end, through a lock file beside it, and
// refuses an Out that exists.
func (s *SFT) Claim() (*runlock.Lock, error) {
	clean := filepath.Clean(s.Out)
	if err := os.MkdirAll(filepath.Dir(clean), 0o755); err != nil {
		return nil, err
	}
	lock, err := runlock.Acquire(besideOut(clean, runlock.File), s.Out)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(s.Out); err == nil {
		lock.Release()
		return nil, fmt.Errorf("%s exists; choose another --out", s.Out)
	}
	return lock, nil
}

// besideOut is the path of a hidden file or directory beside out, named for it.
func besideOut(out, suffix string) string {
	return filepath.Join(filepath.Dir(out), "."+filepath.Base(out)+suffix)
}

// Run trains the model on the pairs, on rt with opts' device and precision, and writes
// Out. Claim comes first. ctx stops it between steps, and then nothing is written.
func (s *SFT) Run(ctx context.Context, rt *torch.Runtime, opts torch.ModelOptions) (err error) {
	pairs, err := s.Settings.Pairs()
	if err != nil {
		return err
	}
	tmp, err := s.tempDir()
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	ids, err := s.tokenize(filepath.Join(tmp, "model.gguf"), pairs)
	if err != nil {
		return err
	}
	opts.Trainable, opts.LoRA = true, s.Settings.LoRA
	opts.LoRA.Seed = s.Settings.Seed
	return s.train(ctx, rt, opts, ids, tmp)
}

// tempDir makes the directory beside Out that everything is built in. Under Claim's lock,
// a leftover of a killed run may go.
func (s *SFT) tempDir() (string, error) {
	tmp := besideOut(filepath.Clean(s.Out), ".tmp")
	if err := os.RemoveAll(tmp); err != nil {
		return "", err
	}
	return tmp, os.Mkdir(tmp, 0o755)
}

// Pairs reads Data's pairs or builds Synthetic's.
func (s SFTSettings) Pairs() ([]trainer.TextPair, error) {
	switch {
	case s.Data != "" && s.Synthetic > 0:
		return nil, errors.New("give --data or --synthetic, not both")
	case s.Data != "":
		return trainer.ReadPairs(s.Data)
	case s.Synthetic > 0:
		ps, err := data.SyntheticWith(s.Synthetic, s.SynthSeed, s.SynthConfig)
		if err != nil {
			return nil, err
		}
		set := s.SynthConfig
		if set.Task != data.TaskExperts {
			if s.Expert != -1 || s.NoMask {
				return nil, errors.New("--expert and --no-mask need --synthetic-task experts")
			}
			return trainer.SyntheticPairs(ps), nil
		}
		if s.Expert == -1 {
			return nil, fmt.Errorf("--synthetic-task experts: give --expert, 0 to %d (the kind of --synthetic-ops %q this model learns)", len(set.Ops)-1, set.Ops)
		}
		return trainer.ExpertPairs(ps, set.Ops, s.Expert, debate.Prompt{KeepAnswers: s.NoMask}, s.Seed)
	default:
		return nil, errors.New("give --data pairs.jsonl or --synthetic N")
	}
}

// tokenize tokenizes the pairs with llama.cpp's tokenizer, so training sees the ids
// sampling will: the model converted to tokGGUF, its vocabulary alone loaded.
func (s *SFT) tokenize(tokGGUF string, pairs []trainer.TextPair) ([]trainer.Pair, error) {
	if err := model.HFToGGUF(s.Settings.Model, tokGGUF, model.HFToGGUFOptions{}); err != nil {
		return nil, err
	}
	tok, err := engine.OpenVocab(tokGGUF)
	if err != nil {
		return nil, err
	}
	defer tok.Close()
	format, err := tok.Format(s.Settings.ChatFormat)
	if err != nil {
		return nil, err
	}
	return trainer.TokenizePairs(tok, format, tok.EndOfTurn(), pairs)
}

// train trains the model of opts on ids and writes it into tmp, then renames tmp to Out.
func (s *SFT) train(ctx context.Context, rt *torch.Runtime, opts torch.ModelOptions, ids []trainer.Pair, tmp string) error {
	st := s.Settings
	m, err := hfmodel.Load(rt, st.Model, opts)
	if err != nil {
		return err
	}
	defer m.Free()
	stats, err := trainer.SFT(m.Model, ids, trainer.SFTConfig{Epochs: st.Epochs, BatchSize: st.Batch, Opt: st.Opt, Seed: st.Seed, Ctx: ctx,
		Progress: func(step, total int, loss float64) {
			fmt.Fprintf(s.Stderr, "\rsft step %d/%d loss %.4f   ", step, total, loss)
		}})
	fmt.Fprintln(s.Stderr)
	if errors.Is(err, trainer.ErrInterrupted) {
		return errors.Join(launch.ErrInterrupted, err)
	}
	if err != nil {
		return err
	}
	// The warm start is a starting point, not a paused run: save weights (LoRA: merged)
	// without the optimizer state, so training starts with fresh AdamW moments.
	if err := m.SaveMerged(filepath.Join(tmp, "hf")); err != nil {
		return err
	}
	if opts.LoRA.Rank > 0 {
		if err := m.SaveAdapter(filepath.Join(tmp, "adapter")); err != nil {
			return err
		}
	}
	if err := model.HFToGGUF(filepath.Join(tmp, "hf"), filepath.Join(tmp, "model.gguf"), model.HFToGGUFOptions{}); err != nil {
		return err
	}
	if err := os.Rename(tmp, s.Out); err != nil {
		return err
	}
	fmt.Fprintf(s.Stdout, "sft: %d pairs, %d steps, loss %.4f -> %.4f (first/last epoch mean); wrote %s and %s\n",
		len(ids), stats.Steps, stats.FirstLoss, stats.LastLoss, filepath.Join(s.Out, "hf"), filepath.Join(s.Out, "model.gguf"))
	return nil
}
