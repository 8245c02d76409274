package launch

// A rank that Slurm's srun started: srun runs one process per task and tells each its
// place in SLURM_* variables, as torchrun does in RANK and the others.

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// underSrun reports whether srun started this process as one of several tasks of a job
// step: srun sets SLURM_STEP_ID, which an sbatch script (also holding SLURM_PROCID and
// SLURM_NTASKS, for the whole allocation) does not, so umad in the batch script itself is
// no rank; and `srun -n 1 umad train --nproc 8` is one launcher, as without srun.
func underSrun() bool {
	n := os.Getenv("SLURM_NTASKS")
	return os.Getenv("SLURM_STEP_ID") != "" && os.Getenv("SLURM_PROCID") != "" && n != "" && n != "1"
}

// JobRank names the variable that makes this process a rank of someone else's job
// (torchrun's RANK, or srun's task), "" when none does.
func JobRank() string {
	switch {
	case os.Getenv("RANK") != "":
		return "RANK=" + os.Getenv("RANK")
	case underSrun():
		return "SLURM_PROCID=" + os.Getenv("SLURM_PROCID") + " (srun)"
	}
	return ""
}

// fromSlurm completes d from srun's variables: rank SLURM_PROCID of SLURM_NTASKS, local
// rank SLURM_LOCALID of this node's count in SLURM_STEP_TASKS_PER_NODE, and rank 0's
// address (slurmRendezvous).
func fromSlurm(d Spec, o Options) (Spec, error) {
	if o.NNodes > 1 {
		return d, fmt.Errorf("--nnodes %d under srun: srun's tasks are the ranks (or, with --nproc, the nodes); drop --nnodes", o.NNodes)
	}
	var err error
	if d.Rank, err = slurmCount("SLURM_PROCID"); err == nil {
		d.World, err = slurmCount("SLURM_NTASKS")
	}
	if err == nil {
		d.LocalRank, err = slurmCount("SLURM_LOCALID")
	}
	if err != nil {
		return d, err
	}
	if d.Rank >= d.World {
		return d, fmt.Errorf("srun: SLURM_PROCID %d is outside SLURM_NTASKS %d", d.Rank, d.World)
	}
	if d.LocalWorld, err = tasksOnNode(); err != nil {
		return d, err
	}
	d.Addr, d.Port, err = slurmRendezvous(o)
	return d, err
}

// srunNodes makes srun's tasks the job's nodes, as torchrun's --nnodes and --node-rank:
// with --nproc N each task launches N ranks, so srun must run one task per node.
func srunNodes(o Options) (Options, error) {
	if o.NNodes > 1 {
		return o, fmt.Errorf("--nnodes %d under srun: srun's tasks are the nodes; drop --nnodes", o.NNodes)
	}
	if n, err := tasksOnNode(); err != nil {
		return o, err
	} else if n != 1 {
		return o, fmt.Errorf("--nproc %d under srun launches a node's ranks from one task, but srun runs %d tasks on this node: ask for --ntasks-per-node=1, or drop --nproc and let srun start one task per rank",
			o.NProc, n)
	}
	var err error
	if o.NNodes, err = slurmCount("SLURM_NTASKS"); err == nil {
		o.NodeRank, err = slurmCount("SLURM_PROCID")
	}
	if err == nil {
		o.MasterAddr, o.MasterPort, err = slurmRendezvous(o)
	}
	o.MasterAddrSet = true
	return o, err
}

// slurmCount reads a count srun set.
func slurmCount(k string) (int, error) {
	n, err := strconv.Atoi(os.Getenv(k))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("srun: %s=%q is not a count", k, os.Getenv(k))
	}
	return n, nil
}

// slurmRendezvous is where rank 0 hosts the store: MASTER_ADDR, else --master-addr when
// given, else the first host of SLURM_STEP_NODELIST (else SLURM_NODELIST); at MASTER_PORT,
// else --master-port.
func slurmRendezvous(o Options) (addr string, port int, err error) {
	if port = o.MasterPort; os.Getenv("MASTER_PORT") != "" {
		if port, err = slurmCount("MASTER_PORT"); err != nil {
			return "", 0, err
		}
	}
	if port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("--master-port must be in 1..65535, got %d", port)
	}
	switch addr = os.Getenv("MASTER_ADDR"); {
	case addr != "":
	case o.MasterAddrSet:
		addr = o.MasterAddr
	default:
		list := os.Getenv("SLURM_STEP_NODELIST")
		if list == "" {
			list = os.Getenv("SLURM_NODELIST")
		}
		if addr, err = firstHost(list); err != nil {
			return "", 0, fmt.Errorf("srun: the node list: %w", err)
		}
	}
	return addr, port, nil
}

// tasksOnNode is the number of this step's tasks on this node: SLURM_NODEID's entry of
// SLURM_STEP_TASKS_PER_NODE (else SLURM_TASKS_PER_NODE), a list such as "2(x3),1" (two
// tasks on each of three nodes, then one); 1 when neither is set.
func tasksOnNode() (int, error) {
	list := os.Getenv("SLURM_STEP_TASKS_PER_NODE")
	if list == "" {
		if list = os.Getenv("SLURM_TASKS_PER_NODE"); list == "" {
			return 1, nil
		}
	}
	node, err := strconv.Atoi(os.Getenv("SLURM_NODEID"))
	if err != nil || node < 0 {
		node = 0 // one node: SLURM_NODEID is 0 or absent
	}
	for _, item := range strings.Split(list, ",") {
		n, repeat := item, "1"
		if i := strings.Index(item, "(x"); i >= 0 && strings.HasSuffix(item, ")") {
			n, repeat = item[:i], item[i+2:len(item)-1]
		}
		tasks, err1 := strconv.Atoi(n)
		times, err2 := strconv.Atoi(repeat)
		if err1 != nil || err2 != nil || tasks < 1 || times < 1 {
			return 0, fmt.Errorf("srun: tasks per node %q: cannot read %q", list, item)
		}
		if node < times {
			return tasks, nil
		}
		node -= times
	}
	return 0, fmt.Errorf("srun: tasks per node %q has no entry for SLURM_NODEID %s", list, os.Getenv("SLURM_NODEID"))
}

// firstHost is the first host of a Slurm host list: "node[01-04,07],gpu1" gives node01,
// each bracket replaced by the first number of its first range, zero padding kept.
func firstHost(list string) (string, error) {
	var host strings.Builder
	for rest := list; rest != "" && rest[0] != ','; {
		open := strings.IndexAny(rest, "[,")
		if open < 0 || rest[open] == ',' {
			if open < 0 {
				open = len(rest)
			}
			host.WriteString(rest[:open])
			break
		}
		host.WriteString(rest[:open])
		end := strings.IndexByte(rest, ']')
		if end < open {
			return "", fmt.Errorf("%q: a [ without its ]", list)
		}
		first, _, _ := strings.Cut(rest[open+1:end], ",")
		first, _, _ = strings.Cut(first, "-")
		if _, err := strconv.ParseUint(first, 10, 32); err != nil {
			return "", fmt.Errorf("%q: %q is not a host range", list, rest[open:end+1])
		}
		host.WriteString(first)
		rest = rest[end+1:]
	}
	if host.Len() == 0 {
		return "", errors.New("empty (SLURM_NODELIST unset?)")
	}
	return host.String(), nil
}
