package bench

import (
	"runtime"
	"slices"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// StableBest is the best (least) of repeated timings of measure: it runs until the best
// has not improved by more than 1% over the last patience tries, at least minTries and at
// most maxTries times. A moment of contention only makes one try slow, and a machine that
// is never quiet shows as a best that keeps improving until maxTries.
func StableBest(measure func() (float64, error), minTries, patience, maxTries int) (float64, error) {
	best, since := 0.0, 0
	for try := 0; try < maxTries; try++ {
		s, err := measure()
		if err != nil {
			return 0, err
		}
		if try == 0 || s < best*0.99 {
			since = 0
		} else {
			since++
		}
		if try == 0 || s < best {
			best = s
		}
		if try+1 >= minTries && since >= patience {
			break
		}
	}
	return best, nil
}

// TriadBandwidth is a STREAM-style triad, a[i] = b[i] + q*c[i] over three arrays of
// bytes/3 each, split over every logical CPU, in bytes moved per second (two read and one
// written per element, as STREAM counts them), the best of stable repeats: the memory
// bandwidth the machine gives all its threads.
func TriadBandwidth(bytes int64) float64 {
	threads := runtime.NumCPU()
	n := int(bytes / 3 / 8)
	a, b, c := hugeFloats(n), hugeFloats(n), hugeFloats(n)
	defer func() { unmapFloats(a); unmapFloats(b); unmapFloats(c) }()
	for i := range n { // touch every page before timing
		a[i], b[i], c[i] = 0, float64(i), float64(n-i)
	}
	chunk := n / threads
	pass := func() (float64, error) {
		var wg sync.WaitGroup
		t0 := time.Now()
		for w := range threads {
			wg.Add(1)
			go func() {
				defer wg.Done()
				lo, hi := w*chunk, (w+1)*chunk
				aw, bw, cw := a[lo:hi], b[lo:hi], c[lo:hi]
				for i := range aw {
					aw[i] = bw[i] + 3*cw[i]
				}
			}()
		}
		wg.Wait()
		return time.Since(t0).Seconds(), nil
	}
	best, _ := StableBest(pass, 10, 10, 100)
	return float64(3*8*chunk*threads) / best
}

// hugeFloats is n float64s of anonymous memory for which the kernel is asked for
// transparent huge pages, or of Go's heap where mapping fails. With 4 KiB pages the triad's
// speed depended on which pages it got: 22 or 29 GB/s from one process to the next on the
// 2-core VM of bench/RESULTS.md, each process steady at its own figure; with 2 MiB pages
// every process measured 23-24 GB/s.
func hugeFloats(n int) []float64 {
	mem, err := unix.Mmap(-1, 0, n*8, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return make([]float64, n)
	}
	_ = unix.Madvise(mem, unix.MADV_HUGEPAGE) // a hint: without THP the pages stay small
	return unsafe.Slice((*float64)(unsafe.Pointer(unsafe.SliceData(mem))), n)
}

// unmapFloats returns hugeFloats' mapping; a heap slice is left to the collector.
func unmapFloats(f []float64) {
	mem := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(f))), len(f)*8)
	_ = unix.Munmap(mem) // EINVAL for a heap slice: nothing to return
}

// Spread is a figure's minimum, median and maximum over runs.
type Spread struct{ Min, Median, Max float64 }

// SpreadOf is the spread of values (at least one).
func SpreadOf(values []float64) Spread {
	v := slices.Sorted(slices.Values(values))
	mid := v[len(v)/2]
	if len(v)%2 == 0 {
		mid = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return Spread{v[0], mid, v[len(v)-1]}
}
