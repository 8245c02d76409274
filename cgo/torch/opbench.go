package torch

/*
#include "plugin.h"
*/
import "C"

import "github.com/umad-dev/umad/trainspec"

// BenchOp is what OpSeconds times.
type BenchOp int32

const (
	BenchMatmul BenchOp = C.UMAD_BENCH_MATMUL // an M x K by K x N matrix product
	BenchCopy   BenchOp = C.UMAD_BENCH_COPY   // a copy of N elements into another tensor
)

// OpSize is the size OpSeconds times an op at: M, K and N of a matrix product, N of a copy.
type OpSize struct{ M, K, N int64 }

// OpSeconds is libtorch's best time of iters runs of op at size in dtype on d, after a
// warm-up run: the peak as the trainer's own library reaches it.
func (r *Runtime) OpSeconds(op BenchOp, d trainspec.Device, dtype DType, size OpSize, iters int) (float64, error) {
	kind, idx := deviceCodes(d)
	var s C.double
	var err error
	r.do(func() {
		err = r.check(C.plugin_bench_op(C.int32_t(op), kind, idx, C.int32_t(dtype), C.int64_t(size.M), C.int64_t(size.K), C.int64_t(size.N),
			C.int32_t(iters), &s, r.errBuf, errBufLen), "bench op")
	})
	return float64(s), err
}
