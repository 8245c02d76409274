package cli

// The multi-process flags of train and debate, read into launch's options (launch/).

import (
	"errors"
	"fmt"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/launch"
	"github.com/umad-dev/umad/run"
	"github.com/umad-dev/umad/trainspec"
)

// distFlags are the multi-process flags of train and debate.
func distFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.IntFlag{Name: "nproc", Value: 1, Usage: "processes (ranks) on this machine: one per GPU on a GPU server; on CPUs they share the cores"},
		&ucli.IntFlag{Name: "nnodes", Value: 1, Usage: "machines in the job, each running --nproc ranks"},
		&ucli.IntFlag{Name: "node-rank", Usage: "this machine's index among --nnodes (0 hosts the rendezvous)"},
		&ucli.StringFlag{Name: "master-addr", Value: "127.0.0.1", Usage: "with --nnodes > 1: address of node 0, where rank 0 hosts the rendezvous store (one machine's ranks meet through a private file)"},
		&ucli.IntFlag{Name: "master-port", Value: 29500, Usage: "with --nnodes > 1: port of the rendezvous store"},
		distTimeoutFlag("longest wait for the other ranks (rendezvous and every collective): a rank that died or hangs fails the job after this"),
		&ucli.StringFlag{Name: "dist-backend", Value: "gloo", Usage: "collectives: gloo (CPU tensors; every libtorch) or nccl (GPU; pip PyTorch builds)"},
	}
}

// shardFlag is train's --shard, the ZeRO stage over the ranks.
func shardFlag() ucli.Flag {
	return &ucli.IntFlag{Name: "shard", Usage: "with --nproc > 1, the ZeRO stage: 0 replicates the training state on every rank; 1 gives each rank the AdamW moments of its 1/N of the parameters; 2 also sums the gradients inside the backward and keeps each rank's 1/N of them (a layer at a time with --grad-checkpoint); 3 also keeps 1/N of the weights and the reference, gathering a layer whole while a pass uses it (full fine-tuning with --grad-checkpoint); --dry-run prints every placement's memory per rank"}
}

// shardStage is --shard for a job of world ranks: one process has nothing to shard and
// runs stage 0, with a warning.
func shardStage(c *ucli.Context, world int) (int, error) {
	s := c.Int("shard")
	switch {
	case s < 0 || s > 3:
		return 0, fmt.Errorf("--shard %d: the ZeRO stage is 0, 1, 2 or 3", s)
	case s > 0 && world == 1:
		fmt.Fprintf(c.App.ErrWriter, "umad: warning: --shard %d with one process: nothing to shard; running as stage 0\n", s)
		return 0, nil
	}
	return s, nil
}

// agentRanksFlag is train's --agent-ranks, one agent per group of ranks.
func agentRanksFlag() ucli.Flag {
	return &ucli.StringFlag{Name: "agent-ranks", Usage: "with --nproc > 1, train each agent on its own group of ranks, one group per agent in agent order (e.g. 0-3,4-7: agent 0 on ranks 0-3, agent 1 on 4-7): an agent's weights, gradients, AdamW moments and reference live on its group alone (sharded over it by --shard), every rank still rolls out debates with every agent, and after each update the group's first rank sends the weights to the other ranks' engines. The groups must not overlap and must cover every rank; the agents' first ranks must see rank 0's --out (one machine, or a shared filesystem)"}
}

// agentRanks is --agent-ranks for a job of world ranks and agents agents; nil when unset.
func agentRanks(c *ucli.Context, world, agents int) ([][]int, error) {
	if !c.IsSet("agent-ranks") {
		return nil, nil
	}
	if world == 1 {
		return nil, errors.New("--agent-ranks needs several processes (--nproc, --nnodes)")
	}
	return trainspec.ParseAgentRanks(c.String("agent-ranks"), agents, world)
}

// offloadFlag is train's --offload.
func offloadFlag() ucli.Flag {
	return &ucli.StringFlag{Name: "offload", Usage: "optimizer: keep the AdamW moments in host memory (pinned) and update them on the CPU, as ZeRO-Offload does: 8 bytes per trained parameter (1/N of them with --shard) leave the GPU, for a copy of each gradient to the host and of the weights back at every optimizer step, a chunk of 16M values at a time. On the CPU it changes nothing but adds those copies"}
}

// readPlacement reads where train keeps the training state of agents agents over a job of
// world ranks: --shard, --agent-ranks, --offload and --grad-checkpoint (the device is
// --train-device, which openTorch resolves).
func readPlacement(c *ucli.Context, world, agents int) (trainspec.Placement, error) {
	var p trainspec.Placement
	var err error
	p.GradCheckpoint = c.Bool("grad-checkpoint")
	if p.Shard, err = shardStage(c, world); err != nil {
		return p, err
	}
	if err := p.CheckShard(c.Int("lora-rank")); err != nil {
		return p, err
	}
	if p.AgentRanks, err = agentRanks(c, world, agents); err != nil {
		return p, err
	}
	p.Offload, err = offloadOptimizer(c)
	return p, err
}

// offloadOptimizer is --offload: true for optimizer, false unset.
func offloadOptimizer(c *ucli.Context) (bool, error) {
	switch s := c.String("offload"); s {
	case "":
		return false, nil
	case "optimizer":
		return true, nil
	default:
		return false, fmt.Errorf("--offload %q: only optimizer (the AdamW moments and their update) is offloaded", s)
	}
}

// distTimeoutFlag is --dist-timeout, the bound on waiting for other ranks.
func distTimeoutFlag(usage string) ucli.Flag {
	return &ucli.DurationFlag{Name: "dist-timeout", Value: run.DefaultDistTimeout, Usage: usage}
}

// resolveDist reads the job's shape (launch.Resolve). A command with --nproc alone
// (debate: its ranks share no process group) passes group false.
func resolveDist(c *ucli.Context, group bool) (launch.Spec, bool, error) {
	o := launch.Options{Group: group, NProc: c.Int("nproc"), Timeout: c.Duration("dist-timeout")}
	if group {
		o.Backend, o.NNodes, o.NodeRank = c.String("dist-backend"), c.Int("nnodes"), c.Int("node-rank")
		o.MasterAddr, o.MasterAddrSet, o.MasterPort = c.String("master-addr"), c.IsSet("master-addr"), c.Int("master-port")
	}
	d, isRank, err := launch.Resolve(o)
	d.Command = commandLine(c) // a cell of umad experiment: its ranks run the cell's command
	return d, isRank, err
}

// launchRanks starts this machine's ranks of a multi-process job when this process is
// the launcher (check, when not nil, refuses a world size first), and waits for them;
// done says it did (the command's work happened in the ranks). Otherwise it returns this
// process's place: a rank's, or rank 0 of 1.
func launchRanks(c *ucli.Context, check func(world int) error) (d launch.Spec, done bool, err error) {
	d, isRank, err := resolveDist(c, true)
	if err != nil || isRank || !d.Multi() {
		return d, false, err
	}
	if check != nil {
		if err := check(d.World); err != nil {
			return d, true, err
		}
	}
	return d, true, launch.Group(d, rankOutput(c))
}

// rankOutput is where the ranks' output goes: the command's writers.
func rankOutput(c *ucli.Context) launch.Output {
	return launch.Output{Stdout: c.App.Writer, Stderr: c.App.ErrWriter}
}
