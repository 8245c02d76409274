package torch

/*
#include <stdlib.h>
#include "plugin.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"
	"unsafe"
)

// Backend is the collective library of a process group.
type Backend int32

const (
	Gloo Backend = C.UMAD_BACKEND_GLOO // CPU tensors; every libtorch has it
	NCCL Backend = C.UMAD_BACKEND_NCCL // CUDA tensors; pip GPU builds only
)

// ParseBackend reads a backend name.
func ParseBackend(s string) (Backend, error) {
	switch s {
	case "gloo":
		return Gloo, nil
	case "nccl":
		return NCCL, nil
	}
	return 0, fmt.Errorf("unknown backend %q (gloo or nccl)", s)
}

// ReduceOp combines values over the ranks.
type ReduceOp int32

const (
	Sum ReduceOp = C.UMAD_REDUCE_SUM
	Max ReduceOp = C.UMAD_REDUCE_MAX
)

// GroupOptions say how to join a process group (torchrun's conventions: rank 0 hosts the
// rendezvous store at MasterAddr:MasterPort).
type GroupOptions struct {
	MasterAddr string
	MasterPort int
	// StoreFile, when set, replaces the TCP store: ranks that all run on this machine meet
	// through this file (a new one per job, in a directory only they reach), so nothing
	// listens on the network for the rendezvous.
	StoreFile   string
	Rank, World int
	Backend     Backend
	// Timeout bounds the rendezvous and every collective, so a rank that died or hangs
	// turns into an error on the others.
	Timeout time.Duration
}

// Group is this process's membership of a process group over libtorch's c10d. Its calls
// run on the runtime's worker thread, like every torch call, and every rank must make the
// same calls in the same order.
type Group struct {
	rt          *Runtime
	ptr         *C.umad_dist
	rank, world int
	// CommTime and CommBytes add up the gradient all-reduces and the sharded weights'
	// all-gathers: wall time and bytes this rank handed to them.
	CommTime  time.Duration
	CommBytes int64
}

// JoinGroup joins the process group; it blocks until every rank joined or the timeout.
func (r *Runtime) JoinGroup(o GroupOptions) (*Group, error) {
	if o.World < 1 || o.Rank < 0 || o.Rank >= o.World {
		return nil, fmt.Errorf("rank %d outside world size %d", o.Rank, o.World)
	}
	g := &Group{rt: r, rank: o.Rank, world: o.World}
	master, where := o.MasterAddr, net.JoinHostPort(o.MasterAddr, strconv.Itoa(o.MasterPort))
	if o.StoreFile != "" {
		master, where = "file://"+o.StoreFile, o.StoreFile // the plugin's spelling of a FileStore
	}
	host := C.CString(master)
	defer C.free(unsafe.Pointer(host))
	var err error
	r.do(func() {
		g.ptr = C.plugin_dist_init(host, C.int32_t(o.MasterPort), C.int32_t(o.Rank), C.int32_t(o.World),
			C.int32_t(o.Backend), C.double(o.Timeout.Seconds()), r.errBuf, errBufLen)
		if g.ptr == nil {
			err = fmt.Errorf("rank %d of %d: join the process group at %s: %s", o.Rank, o.World, where, C.GoString(r.errBuf))
		}
	})
	if err != nil {
		return nil, err
	}
	return g, nil
}

// Sub makes the process group of ranks (increasing, this rank among them), which meet
// through g's rendezvous under name: every member calls it with the same name and ranks,
// the others do not. Its ranks are their places in ranks. Close it before g.
func (g *Group) Sub(name string, ranks []int) (*Group, error) {
	s := &Group{rt: g.rt, rank: slices.Index(ranks, g.rank), world: len(ranks)}
	cr := make([]C.int32_t, len(ranks))
	for i, r := range ranks {
		cr[i] = C.int32_t(r)
	}
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	if g.ptr == nil {
		return nil, errors.New("subgroup " + name + ": process group was closed")
	}
	var err error
	g.rt.do(func() {
		var first *C.int32_t
		if len(cr) > 0 {
			first = &cr[0]
		}
		s.ptr = C.plugin_dist_subgroup(g.ptr, cn, first, C.int32_t(len(cr)), g.rt.errBuf, errBufLen)
		if s.ptr == nil {
			err = fmt.Errorf("rank %d: join the process group %s of ranks %v: %s", g.rank, name, ranks, C.GoString(g.rt.errBuf))
		}
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Rank is this process's rank, World the number of ranks.
func (g *Group) Rank() int  { return g.rank }
func (g *Group) World() int { return g.world }

// Close leaves the group.
func (g *Group) Close() {
	if g == nil || g.ptr == nil {
		return
	}
	g.rt.do(func() { C.plugin_dist_free(g.ptr) })
	g.ptr = nil
}

func (g *Group) call(what string, f func() C.int) error {
	if g.ptr == nil {
		return errors.New(what + ": process group was closed")
	}
	var err error
	g.rt.do(func() { err = g.rt.check(f(), what) })
	return err
}

// Agree checks that every rank holds the same value under key (a hash of the binary and
// the configuration, say); the error names the first rank that differs from rank 0.
func (g *Group) Agree(key string, value []byte) error {
	ck := C.CString(key)
	defer C.free(unsafe.Pointer(ck))
	return g.call("check "+key, func() C.int {
		return C.plugin_dist_agree(g.ptr, ck, bytesPtr(value), C.int64_t(len(value)), g.rt.errBuf, errBufLen)
	})
}

// modelCall runs the plugin call f on m's behalf: what names it in errors.
func (g *Group) modelCall(m *Model, what string, f func() C.int) error {
	if err := m.live(what); err != nil {
		return err
	}
	return g.call(what, f)
}

// BroadcastModel copies root's model into m on every rank: the weights and, for a trainable
// model, the AdamW moments and step counters, so a rank that loaded other weights (or none
// of the checkpoint) continues as root does.
func (g *Group) BroadcastModel(m *Model, root int) error {
	if err := m.live("broadcast model"); err != nil {
		return err
	}
	err := g.call("broadcast model", func() C.int {
		return C.plugin_dist_broadcast_model(g.ptr, m.ptr, C.int32_t(root), g.rt.errBuf, errBufLen)
	})
	if err != nil || !m.opts.Trainable {
		return err
	}
	step, skipped, err := m.OptimizerState()
	if err != nil {
		return err
	}
	v := []float64{0, 0} // a sum in which only root's counters count
	if g.rank == root {
		v = []float64{float64(step), float64(skipped)}
	}
	if err := g.AllReduce(v, Sum); err != nil {
		return err
	}
	return m.SetOptimizerState(int64(v[0]), int64(v[1]))
}

// AllReduceGrads sums m's gradients over the ranks in buckets of about bucketBytes.
func (g *Group) AllReduceGrads(m *Model, bucketBytes int64) error {
	if err := m.live("all-reduce gradients"); err != nil {
		return err
	}
	start := time.Now()
	var sent C.int64_t
	err := g.call("all-reduce gradients", func() C.int {
		return C.plugin_dist_allreduce_grads(g.ptr, m.ptr, C.int64_t(bucketBytes), &sent, g.rt.errBuf, errBufLen)
	})
	g.CommTime += time.Since(start)
	g.CommBytes += int64(sent)
	return err
}

// ShardOptimizer keeps this rank's part of m's AdamW moments (ZeRO stage 1): the trained
// elements, flattened in checkpoint order, are cut into one contiguous part per rank, and
// m's optimizer steps update this rank's part alone; AllGatherParams then gives every rank
// the others' parts. On a sharded model it drops the copy GatherOptimizer made.
func (g *Group) ShardOptimizer(m *Model) error {
	return g.modelCall(m, "shard the optimizer", func() C.int {
		return C.plugin_dist_shard_optimizer(g.ptr, m.ptr, g.rt.errBuf, errBufLen)
	})
}

// ShardGradients makes m, whose optimizer state ShardOptimizer sharded, a ZeRO stage 2
// model: its training passes sum the gradients over the ranks as the backward completes
// them (a layer at a time with gradient checkpointing, else at each pass's end), in buckets
// of about bucketBytes, and each rank keeps its part of the sums for its part of the step.
// Every rank must then run as many passes per optimizer step as the others: ZeroPass
// stands for a pass without data.
func (g *Group) ShardGradients(m *Model, bucketBytes int64) error {
	return g.modelCall(m, "shard the gradients", func() C.int {
		return C.plugin_dist_shard_gradients(g.ptr, m.ptr, C.int64_t(bucketBytes), g.rt.errBuf, errBufLen)
	})
}

// ZeroPass adds zeros to a stage 2 model's gradient sums, in the collectives of one pass.
func (g *Group) ZeroPass(m *Model) error {
	return g.modelCall(m, "run an empty pass", func() C.int {
		return C.plugin_dist_zero_pass(g.ptr, m.ptr, g.rt.errBuf, errBufLen)
	})
}

// ShardWeights makes m a ZeRO stage 3 model: each rank keeps its part of every parameter
// (cut as ShardOptimizer cuts the moments) and releases the rest, and m's passes gather a
// layer's parameters whole while they use it, in all-gathers of about bucketBytes. A
// trainable m must be at stage 2 and train with gradient checkpointing; a frozen one (a
// reference) needs neither. Every rank must then run as many passes of m as the others:
// EmptyForward stands for a scoring pass, ZeroPass for a training pass.
func (g *Group) ShardWeights(m *Model, bucketBytes int64) error {
	return g.modelCall(m, "shard the weights", func() C.int {
		return C.plugin_dist_shard_weights(g.ptr, m.ptr, C.int64_t(bucketBytes), g.rt.errBuf, errBufLen)
	})
}

// EmptyForward runs the gathers of a stage 3 model's forward pass without data.
func (g *Group) EmptyForward(m *Model) error {
	return g.modelCall(m, "run an empty forward pass", func() C.int {
		return C.plugin_dist_empty_forward(g.ptr, m.ptr, g.rt.errBuf, errBufLen)
	})
}

// HoldWeights gathers a stage 3 model's parameters whole on every rank (all call it), so
// that they can be read, until ReleaseWeights; on other models it does nothing.
func (g *Group) HoldWeights(m *Model) error {
	return g.modelCall(m, "gather the weights", func() C.int {
		return C.plugin_dist_hold_weights(g.ptr, m.ptr, g.rt.errBuf, errBufLen)
	})
}

// ReleaseWeights ends a HoldWeights: each rank keeps its part again.
func (g *Group) ReleaseWeights(m *Model) error {
	return g.modelCall(m, "release the weights", func() C.int {
		return C.plugin_dist_release_weights(g.ptr, m.ptr, g.rt.errBuf, errBufLen)
	})
}

// CommTotals is the time spent in collectives and the bytes handed to them so far: the
// calls above (CommTime, CommBytes) and those the plugin makes inside training passes and
// stage 2 steps.
func (g *Group) CommTotals() (time.Duration, int64, error) {
	var bytes C.int64_t
	var sec C.double
	err := g.call("read the collectives' totals", func() C.int {
		return C.plugin_dist_comm_totals(g.ptr, &bytes, &sec, g.rt.errBuf, errBufLen)
	})
	return g.CommTime + time.Duration(float64(sec)*float64(time.Second)), g.CommBytes + int64(bytes), err
}

// AllGatherParams gives every rank the parts of m's weights the others updated in a
// sharded optimizer step, all-gathered in buckets of about bucketBytes.
func (g *Group) AllGatherParams(m *Model, bucketBytes int64) error {
	if err := m.live("all-gather weights"); err != nil {
		return err
	}
	start := time.Now()
	var sent C.int64_t
	err := g.call("all-gather weights", func() C.int {
		return C.plugin_dist_allgather_params(g.ptr, m.ptr, C.int64_t(bucketBytes), &sent, g.rt.errBuf, errBufLen)
	})
	g.CommTime += time.Since(start)
	g.CommBytes += int64(sent)
	return err
}

// GatherOptimizer copies a sharded model's whole AdamW moments into root's host memory,
// where reading them (a checkpoint) works as on an unsharded model until ShardOptimizer.
func (g *Group) GatherOptimizer(m *Model, root int) error {
	return g.modelCall(m, "gather the optimizer state", func() C.int {
		return C.plugin_dist_gather_optimizer(g.ptr, m.ptr, C.int32_t(root), g.rt.errBuf, errBufLen)
	})
}

// Broadcast copies root's b into every rank's b (all pass buffers of one length).
func (g *Group) Broadcast(b []byte, root int) error {
	return g.call("broadcast", func() C.int {
		return C.plugin_dist_broadcast_bytes(g.ptr, bytesPtr(b), C.int64_t(len(b)), C.int32_t(root), g.rt.errBuf, errBufLen)
	})
}

// AllReduce reduces v in place over the ranks.
func (g *Group) AllReduce(v []float64, op ReduceOp) error {
	if len(v) == 0 {
		return nil
	}
	return g.call("all-reduce", func() C.int {
		return C.plugin_dist_allreduce_f64(g.ptr, (*C.double)(unsafe.Pointer(&v[0])), C.int64_t(len(v)), C.int32_t(op),
			g.rt.errBuf, errBufLen)
	})
}

// AllGather returns every rank's bytes, in rank order.
func (g *Group) AllGather(b []byte) ([][]byte, error) {
	lens := make([]int64, g.world)
	var out unsafe.Pointer
	err := g.call("all-gather", func() C.int {
		return C.plugin_dist_allgather(g.ptr, bytesPtr(b), C.int64_t(len(b)), (*C.int64_t)(unsafe.Pointer(&lens[0])),
			&out, g.rt.errBuf, errBufLen)
	})
	if err != nil {
		return nil, err
	}
	defer C.free(out)
	parts := make([][]byte, g.world)
	off := 0
	for r, n := range lens {
		parts[r] = C.GoBytes(unsafe.Add(out, off), C.int(n))
		off += int(n)
	}
	return parts, nil
}

// Barrier returns once every rank reached it.
func (g *Group) Barrier() error {
	return g.call("barrier", func() C.int { return C.plugin_dist_barrier(g.ptr, g.rt.errBuf, errBufLen) })
}

func bytesPtr(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}
