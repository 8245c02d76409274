package sampler

import (
	"fmt"
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
			for i := 0; b.Loop(); i++ {
				if _, err := Sample(rows[i%len(rows)], benchParams, &rng); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/row")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*qwenVocab), "ns/entry")
		})
	}
}

// BenchmarkFusedPass151936 is the exact pass over one row on one core
// (maximum, exp, Z, log Z, entropy and the bucket histogram: everything but
// truncation and the draw), with each kernel level this CPU has and with the
// Go code. ns/entry is the issue 14 figure (target <= 2).
func BenchmarkFusedPass151936(b *testing.B) {
	for level := bestSIMD; level >= noSIMD; level-- {
		for _, kind := range benchRows {
			b.Run(simdNames[level]+"/"+kind.name, func(b *testing.B) {
				row := kind.make(rand.New(rand.NewPCG(1, 2)), qwenVocab)
				s := new(scratch)
				s.logits = row
				withSIMD(level, func() {
					for b.Loop() {
						if _, _, _, err := s.prepare(benchParams.Temperature); err != nil {
							b.Fatal(err)
						}
					}
				})
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*qwenVocab), "ns/entry")
			})
		}
	}
}

// BenchmarkBatch64x151936 is one decode step's sampling at batch 64 with 1
// and 2 workers: rows/s should grow near-linearly with the workers (given
// idle cores).
func BenchmarkBatch64x151936(b *testing.B) {
	for _, workers := range []int{1, 2} {
		for _, kind := range benchRows {
			b.Run(fmt.Sprintf("workers=%d/%s", workers, kind.name), func(b *testing.B) {
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
				pool := NewBatch(workers)
				defer pool.Close()
				for b.Loop() {
					if err := pool.Sample(rows, params, rngs, out); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/row")
				b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "rows/s")
			})
		}
	}
}
