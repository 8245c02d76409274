package torch

import (
	"strings"
	"testing"

	"github.com/umad-dev/umad/trainspec"
)

// The plugin times a matrix product and a copy on the CPU in each trainer dtype, a product
// of twice the work taking longer, and refuses what it cannot time with one line.
func TestOpSeconds(t *testing.T) {
	rt := openForTest(t)
	for _, dt := range []DType{Float32, BFloat16} {
		for _, op := range []BenchOp{BenchMatmul, BenchCopy} {
			if s, err := rt.OpSeconds(op, trainspec.CPU, dt, OpSize{64, 32, 16}, 2); err != nil || !(s > 0) {
				t.Errorf("op %d, dtype %d: %v s, %v", op, dt, s, err)
			}
		}
	}
	// The shape is the plugin's: M x K by K x N at 8 times the work of another takes longer.
	small, err1 := rt.OpSeconds(BenchMatmul, trainspec.CPU, Float32, OpSize{256, 256, 256}, 5)
	big, err2 := rt.OpSeconds(BenchMatmul, trainspec.CPU, Float32, OpSize{256, 2048, 256}, 5)
	if err1 != nil || err2 != nil || !(big > 2*small) {
		t.Errorf("256 x 256 by 256 x 256 took %g s, 256 x 2048 by 2048 x 256 %g s (%v, %v): want the second over twice the first", small, big, err1, err2)
	}
	for _, tc := range []struct {
		op   BenchOp
		d    trainspec.Device
		size OpSize
		want string
	}{
		{BenchOp(7), trainspec.CPU, OpSize{N: 64}, "unknown op 7"},
		{BenchMatmul, trainspec.CPU, OpSize{4, 4, 0}, "n and iters must be at least 1"},
		{BenchMatmul, trainspec.CPU, OpSize{0, 4, 4}, "m and k must be at least 1"},
		{BenchCopy, trainspec.Device{CUDA: true, Index: 99}, OpSize{N: 64}, "cuda:99 requested"},
	} {
		if _, err := rt.OpSeconds(tc.op, tc.d, Float32, tc.size, 1); err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("op %d on %+v, size %+v: %v, want one line with %q", tc.op, tc.d, tc.size, err, tc.want)
		}
	}
}
