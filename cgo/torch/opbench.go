package torch

/*
#include "plugin.h"
*/
import "C"

import "github.com/umad-dev/umad/trainspec"

// BenchOp is what OpSeconds times.
type BenchOp int32

const (
	BenchMatmul BenchOp = C.UMAD_BENCH_MATMUL // an n x n by n x n matrix product
	BenchCopy   BenchOp = C.UMAD_BENCH_COPY   // a copy of n elements into another tensor
)

// OpSeconds is libtorch's best time of iters runs of op at size n in dtype on d, after a
// warm-up run: the machine's peak as the trainer's own library reaches it.
func (r *Runtime) OpSeconds(op BenchOp, d trainspec.Device, dtype DType, n int64, iters int) (float64, error) {
	kind, idx := deviceCodes(d)
	var s C.double
	var err error
	r.do(func() {
		err = r.check(C.plugin_bench_op(C.int32_t(op), kind, idx, C.int32_t(dtype), C.int64_t(n), C.int32_t(iters), &s, r.errBuf, errBufLen), "bench op")
	})
	return float64(s), err
}
