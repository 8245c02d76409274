package memplan

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Size formats bytes for people: KiB, MiB or GiB with one or two decimals.
func Size(b int64) string {
	switch f := float64(b); {
	case b >= 1<<30:
		return fmt.Sprintf("%.2f GiB", f/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", f/(1<<20))
	}
	return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
}

// ParseSize reads a size as people write it: bytes, or a number with K, M, G or T (KiB,
// MiB, GiB, TiB; powers of 1024).
func ParseSize(s string) (int64, error) {
	t := strings.TrimSuffix(strings.TrimSuffix(strings.ToUpper(strings.TrimSpace(s)), "B"), "I")
	mult := 1.0
	if n := len(t); n > 0 {
		if i := strings.IndexByte("KMGT", t[n-1]); i >= 0 {
			mult, t = math.Pow(1024, float64(i+1)), t[:n-1]
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
	if err != nil || !(v > 0) || v*mult > math.MaxInt64/2 {
		return 0, fmt.Errorf("size %q: want a positive number of bytes, or one with KiB, MiB, GiB or TiB", s)
	}
	return int64(v * mult), nil
}
