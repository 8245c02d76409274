package torch

import (
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/umad-dev/umad/trainspec"
)

// benchConfig matches bench/torch_eager.py's defaults, so tokens/s compare directly:
//
//	go test ./cgo/torch/ -run '^$' -bench 'Plugin(LogProbs|Update)$/bench' -benchtime 5x
//	./build.sh eager --threads 1
var benchConfig = Config{VocabSize: 4096, HiddenSize: 256, IntermediateSize: 512, NumLayers: 4,
	NumHeads: 8, NumKVHeads: 2, HeadDim: 32, RopeTheta: 1e6, RMSNormEps: 1e-6, TieEmbeddings: true, AttentionBias: true}

// benchShapes are the shapes the plugin is compared with PyTorch eager at: the small one
// above and Qwen2.5-0.5B's (bench/torch_eager.py --preset qwen2.5-0.5b; model/shape.go's
// preset, repeated here because this package sits below model/).
var benchShapes = []struct {
	name                   string
	cfg                    Config
	seqs, prompt, response int
}{
	{"bench", benchConfig, 8, 64, 64},
	{"qwen2.5-0.5b", Config{VocabSize: 151936, HiddenSize: 896, IntermediateSize: 4864,
		NumLayers: 24, NumHeads: 14, NumKVHeads: 2, HeadDim: 64, RopeTheta: 1e6, RMSNormEps: 1e-6,
		TieEmbeddings: true, AttentionBias: true}, 4, 64, 64},
}

func benchBatch(vocab, seqs, prompt, response int) (prompts, responses [][]int32) {
	rng := rand.New(rand.NewPCG(2, 2))
	for i := 0; i < seqs; i++ {
		p, r := make([]int32, prompt), make([]int32, response)
		for j := range p {
			p[j] = int32(rng.IntN(vocab))
		}
		for j := range r {
			r[j] = int32(rng.IntN(vocab))
		}
		prompts, responses = append(prompts, p), append(responses, r)
	}
	return prompts, responses
}

func BenchmarkPluginLogProbs(b *testing.B) { benchShaped(b, benchLogProbs, ModelOptions{}) }
func BenchmarkPluginUpdate(b *testing.B)   { benchShaped(b, benchUpdate, ModelOptions{Trainable: true}) }

// The bf16 path on the CPU: the GPU's code, for the cost of bf16 arithmetic on this CPU.
func BenchmarkPluginBF16LogProbs(b *testing.B) {
	benchShaped(b, benchLogProbs, ModelOptions{Precision: trainspec.PrecisionBF16})
}
func BenchmarkPluginBF16Update(b *testing.B) {
	benchShaped(b, benchUpdate, ModelOptions{Precision: trainspec.PrecisionBF16, Trainable: true})
}

// benchShaped runs one benchmark per shape of benchShapes, reporting tokens (prompt and
// response) per second as bench/torch_eager.py does.
func benchShaped(b *testing.B, run func(*testing.B, *Model, [][]int32, [][]int32), opts ModelOptions) {
	for _, s := range benchShapes {
		b.Run(s.name, func(b *testing.B) {
			m := randomModel(b, openForTest(b), s.cfg, opts, 1)
			p, r := benchBatch(s.cfg.VocabSize, s.seqs, s.prompt, s.response)
			// One untimed call first, as torch_eager.py makes: the first update allocates
			// the gradients and touches the AdamW state, which no later step repeats.
			run(b, m, p, r)
			faults := minorFaults()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				run(b, m, p, r)
			}
			b.ReportMetric(float64(b.N*s.seqs*(s.prompt+s.response))/b.Elapsed().Seconds(), "tokens/s")
			// Pages first touched per call: freshly mapped buffers, zeroed by the kernel.
			b.ReportMetric(float64(minorFaults()-faults)/float64(b.N), "faults/op")
		})
	}
}

// minorFaults is the process's count of minor page faults so far.
func minorFaults() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Minflt
}

func benchLogProbs(b *testing.B, m *Model, p, r [][]int32) {
	if _, _, err := m.LogProbs(p, r, 0.6); err != nil {
		b.Fatal(err)
	}
}

// benchUpdate is one SFT step, as torch_eager.py's update: loss, backward, clip, AdamW.
func benchUpdate(b *testing.B, m *Model, p, r [][]int32) {
	if _, err := m.SFTLoss(p, r, true, 1); err != nil {
		b.Fatal(err)
	}
	opt := trainspec.AdamW{LR: 1e-5, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, MaxGradNorm: 1}
	if _, err := m.Step(opt); err != nil {
		b.Fatal(err)
	}
}

// peakRSS resets the process's resident high-water mark, runs f, and returns the growth of
// the mark in MiB.
func peakRSS(b *testing.B, f func()) float64 {
	read := func() float64 {
		raw, err := os.ReadFile("/proc/self/status")
		if err != nil {
			b.Skip("no /proc/self/status")
		}
		for _, line := range strings.Split(string(raw), "\n") {
			if strings.HasPrefix(line, "VmHWM:") {
				kb, _ := strconv.ParseFloat(strings.Fields(line)[1], 64)
				return kb / 1024
			}
		}
		b.Skip("no VmHWM")
		return 0
	}
	rss := func() float64 {
		raw, _ := os.ReadFile("/proc/self/status")
		for _, line := range strings.Split(string(raw), "\n") {
			if strings.HasPrefix(line, "VmRSS:") {
				kb, _ := strconv.ParseFloat(strings.Fields(line)[1], 64)
				return kb / 1024
			}
		}
		return 0
	}
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Skipf("cannot reset the high-water mark: %v", err)
	}
	base := rss()
	f()
	return read() - base
}

// BenchmarkPluginLogProbsMemory reports the peak memory of log-probs at vocabulary 151,936,
// chunked (default) and materialised, for 4 x 128 response tokens.
func BenchmarkPluginLogProbsMemory(b *testing.B) {
	rt := openForTest(b)
	cfg := benchConfig
	cfg.VocabSize = 151936
	chunked := randomModel(b, rt, cfg, ModelOptions{}, 1)
	full, err := chunked.Clone(ModelOptions{LogitChunk: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer full.Free()
	p, r := benchBatch(cfg.VocabSize, 4, 16, 128)
	for i := 0; i < b.N; i++ {
		c := peakRSS(b, func() { chunked.LogProbs(p, r, 0.6) })
		f := peakRSS(b, func() { full.LogProbs(p, r, 0.6) })
		b.ReportMetric(c, "MiB-chunked")
		b.ReportMetric(f, "MiB-materialised")
		b.ReportMetric(c/f, "ratio")
	}
}
