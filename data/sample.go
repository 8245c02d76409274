package data

import (
	"cmp"
	"math/rand/v2"
	"strings"
)

// shuffle permutes problems in place with a Fisher-Yates shuffle driven by PCG output alone:
// the algorithm is written here, not taken from a library method whose internals may change,
// so a seed selects the same subset in every Go version.
func shuffle(problems []Problem, seed uint64) {
	src := rand.NewPCG(seed, 0x756d6164) // "umad": a fixed stream so seeds alone choose
	for i := len(problems) - 1; i > 0; i-- {
		j := boundedRandom(src, uint64(i)+1)
		problems[i], problems[j] = problems[j], problems[i]
	}
}

// boundedRandom draws uniformly from [0, n) by rejecting the biased top of the range.
func boundedRandom(src *rand.PCG, n uint64) uint64 {
	limit := -n % n // (2^64 - n) mod n: values below it would favour small results
	for {
		if v := src.Uint64(); v >= limit {
			return v % n
		}
	}
}

// naturalCompare orders paths with digit runs compared as numbers, so 2.json sorts before
// 10.json; paths equal that way ("a7", "a07") fall back to byte order.
func naturalCompare(a, b string) int {
	return cmp.Or(compareDigitRuns(a, b), strings.Compare(a, b))
}

func compareDigitRuns(a, b string) int {
	for a != "" && b != "" {
		da, db := digitPrefix(a), digitPrefix(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if c := cmp.Or(cmp.Compare(len(na), len(nb)), strings.Compare(na, nb)); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return cmp.Compare(a[0], b[0])
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

func digitPrefix(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}
