package torch

import (
	"strings"
	"testing"

	"github.com/umad-dev/umad/trainspec"
)

// The plugin times a matrix product and a copy on the CPU in each trainer dtype, and refuses
// what it cannot time with one line.
func TestOpSeconds(t *testing.T) {
	rt := openForTest(t)
	for _, dt := range []DType{Float32, BFloat16} {
		for _, op := range []BenchOp{BenchMatmul, BenchCopy} {
			if s, err := rt.OpSeconds(op, trainspec.CPU, dt, 64, 2); err != nil || !(s > 0) {
				t.Errorf("op %d, dtype %d: %v s, %v", op, dt, s, err)
			}
		}
	}
	for _, tc := range []struct {
		op   BenchOp
		d    trainspec.Device
		n    int64
		want string
	}{
		{BenchOp(7), trainspec.CPU, 64, "unknown op 7"},
		{BenchMatmul, trainspec.CPU, 0, "n and iters must be at least 1"},
		{BenchCopy, trainspec.Device{CUDA: true, Index: 99}, 64, "cuda:99 requested"},
	} {
		if _, err := rt.OpSeconds(tc.op, tc.d, Float32, tc.n, 1); err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("op %d on %+v, n %d: %v, want one line with %q", tc.op, tc.d, tc.n, err, tc.want)
		}
	}
}
