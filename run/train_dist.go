package run

// A training request's job over several processes (--nproc, --nnodes) and where its
// training state lives over their ranks (--shard, --agent-ranks, --offload).

import (
	"errors"
	"fmt"

	"github.com/umad-dev/umad/launch"
	"github.com/umad-dev/umad/trainspec"
)

// dist is the job's shape (launch.Resolve) and whether this process is one of its ranks.
func (r *TrainRequest) dist() (launch.Spec, bool, error) {
	o := launch.Options{Group: true, NProc: r.NProc, Timeout: r.DistTimeout, Backend: r.DistBackend, NNodes: r.NNodes,
		NodeRank: r.NodeRank, MasterAddr: r.MasterAddr, MasterAddrSet: r.given["master-addr"], MasterPort: r.MasterPort}
	d, isRank, err := launch.Resolve(o)
	d.Command = r.RankCommand
	return d, isRank, err
}

// launchRanks starts this machine's ranks of a multi-process job when this process is
// the launcher (check refuses a world size first), and waits for them; done says it did
// (the run happened in the ranks). Otherwise it returns this process's place: a rank's,
// or rank 0 of 1.
func (r *TrainRequest) launchRanks(check func(world int) error) (d launch.Spec, done bool, err error) {
	d, isRank, err := r.dist()
	if err != nil || isRank || !d.Multi() {
		return d, false, err
	}
	if err := check(d.World); err != nil {
		return d, true, err
	}
	return d, true, launch.Group(d, launch.Output{Stdout: r.Stdout, Stderr: r.Stderr})
}

// placement is where the training state of agents agents lives over a job of world
// ranks: --shard, --agent-ranks, --offload and --grad-checkpoint (the device is
// --train-device, which OpenTorch resolves).
func (r *TrainRequest) placement(world, agents int) (trainspec.Placement, error) {
	var p trainspec.Placement
	var err error
	p.GradCheckpoint = r.GradCheckpoint
	if p.Shard, err = r.shard(world); err != nil {
		return p, err
	}
	if err := p.CheckShard(r.LoRARank); err != nil {
		return p, err
	}
	if r.given["agent-ranks"] {
		if world == 1 {
			return p, errors.New("--agent-ranks needs several processes (--nproc, --nnodes)")
		}
		if p.AgentRanks, err = trainspec.ParseAgentRanks(r.AgentRanks, agents, world); err != nil {
			return p, err
		}
	}
	switch r.Offload {
	case "":
	case "optimizer":
		p.Offload = true
	default:
		return p, fmt.Errorf("--offload %q: only optimizer (the AdamW moments and their update) is offloaded", r.Offload)
	}
	return p, nil
}

// shard is --shard for a job of world ranks: one process has nothing to shard and runs
// stage 0, with a warning.
func (r *TrainRequest) shard(world int) (int, error) {
	switch s := r.Shard; {
	case s < 0 || s > 3:
		return 0, fmt.Errorf("--shard %d: the ZeRO stage is 0, 1, 2 or 3", s)
	case s > 0 && world == 1:
		fmt.Fprintf(r.Stderr, "umad: warning: --shard %d with one process: nothing to shard; running as stage 0\n", s)
		return 0, nil
	}
	return r.Shard, nil
}
