package cli

// The multi-process flags of train and debate, read into launch's options (launch/).

import (
	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/run"
)

// distFlags are the multi-process flags of train and debate.
func distFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.IntFlag{Name: "nproc", Value: 1, Usage: "processes (ranks) on this machine: one per GPU on a GPU server; on CPUs they share the cores"},
		&ucli.IntFlag{Name: "nnodes", Value: 1, Usage: "machines in the job, each running --nproc ranks"},
		&ucli.IntFlag{Name: "node-rank", Usage: "this machine's index among --nnodes (0 hosts the rendezvous)"},
		&ucli.StringFlag{Name: "master-addr", Value: run.DefaultMasterAddr, Usage: "with --nnodes > 1: address of node 0, where rank 0 hosts the rendezvous store (one machine's ranks meet through a private file)"},
		&ucli.IntFlag{Name: "master-port", Value: run.DefaultMasterPort, Usage: "with --nnodes > 1: port of the rendezvous store"},
		distTimeoutFlag("longest wait for the other ranks (rendezvous and every collective): a rank that died or hangs fails the job after this"),
		&ucli.StringFlag{Name: "dist-backend", Value: run.DefaultDistBackend, Usage: "collectives: gloo (CPU tensors; every libtorch) or nccl (GPU; pip PyTorch builds)"},
	}
}

// shardFlag is train's --shard, the ZeRO stage over the ranks.
func shardFlag() ucli.Flag {
	return &ucli.IntFlag{Name: "shard", Usage: "with --nproc > 1, the ZeRO stage: 0 replicates the training state on every rank; 1 gives each rank the AdamW moments of its 1/N of the parameters; 2 also sums the gradients inside the backward and keeps each rank's 1/N of them (a layer at a time with --grad-checkpoint); 3 also keeps 1/N of the weights and the reference, gathering a layer whole while a pass uses it (full fine-tuning with --grad-checkpoint); --dry-run prints every placement's memory per rank"}
}

// agentRanksFlag is train's --agent-ranks, one agent per group of ranks.
func agentRanksFlag() ucli.Flag {
	return &ucli.StringFlag{Name: "agent-ranks", Usage: "with --nproc > 1, train each agent on its own group of ranks, one group per agent in agent order (e.g. 0-3,4-7: agent 0 on ranks 0-3, agent 1 on 4-7): an agent's weights, gradients, AdamW moments and reference live on its group alone (sharded over it by --shard), every rank still rolls out debates with every agent, and after each update the group's first rank sends the weights to the other ranks' engines. The groups must not overlap and must cover every rank; the agents' first ranks must see rank 0's --out (one machine, or a shared filesystem)"}
}

// offloadFlag is train's --offload.
func offloadFlag() ucli.Flag {
	return &ucli.StringFlag{Name: "offload", Usage: "optimizer: keep the AdamW moments in host memory (pinned) and update them on the CPU, as ZeRO-Offload does: 8 bytes per trained parameter (1/N of them with --shard) leave the GPU, for a copy of each gradient to the host and of the weights back at every optimizer step, a chunk of 16M values at a time. On the CPU it changes nothing but adds those copies"}
}

// distTimeoutFlag is --dist-timeout, the bound on waiting for other ranks.
func distTimeoutFlag(usage string) ucli.Flag {
	return &ucli.DurationFlag{Name: "dist-timeout", Value: run.DefaultDistTimeout, Usage: usage}
}
