package sampler

import (
	"math/rand/v2"
	"testing"
)

// benchParams are the sampling settings of the benchmarks: T = 0.6, top-p 0.95.
var benchParams = Params{Temperature: 0.6, TopP: 0.95}

// benchRows are the two kinds of random rows the benchmarks run on.
var benchRows = []struct {
	name string
	make func(r *rand.Rand, vocab int) []float32
}{
	{"lmlike", lmLikeRow},
	{"gaussian", func(r *rand.Rand, vocab int) []float32 { return gaussianRow(r, vocab, 1) }},
}

// BenchmarkSampleRow151936 is the single-threaded cost of one row.
func BenchmarkSampleRow151936(b *testing.B) {
	for _, kind := range benchRows {
		b.Run(kind.name, func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			rows := make([][]float32, 8)
			for i := range rows {
				rows[i] = kind.make(r, qwenVocab)
			}
			rng := NewStream(3)
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if _, err := Sample(rows[i%len(rows)], benchParams, &rng); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/row")
		})
	}
}

// BenchmarkBatch64x151936 is one decode step's sampling at batch 64 on all
// cores (GOMAXPROCS workers).
func BenchmarkBatch64x151936(b *testing.B) {
	for _, kind := range benchRows {
		b.Run(kind.name, func(b *testing.B) {
			const batch = 64
			r := rand.New(rand.NewPCG(4, 5))
			rows := make([][]float32, batch)
			params := make([]Params, batch)
			streams := make([]Stream, batch)
			rngs := make([]*Stream, batch)
			for i := range rows {
				rows[i] = kind.make(r, qwenVocab)
				params[i] = benchParams
				streams[i] = NewStream(6, uint64(i))
				rngs[i] = &streams[i]
			}
			out := make([]Draw, batch)
			pool := NewBatch(0)
			defer pool.Close()
			b.ResetTimer()
			for b.Loop() {
				if err := pool.Sample(rows, params, rngs, out); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/row")
		})
	}
}
