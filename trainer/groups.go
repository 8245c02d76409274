package trainer

// One agent per group of ranks (Config.Placement.AgentRanks): agent i's training state (actor,
// reference, AdamW moments) lives only on the ranks of its group, which split the whole
// step's batch among them and sum their gradients over their own process group, sharded
// or not (--shard applies inside the group). Every rank still rolls out its share of the
// debates with every agent's engine, so a step's debates are all-gathered before the
// update. After it, the group's first rank (its leader) sends the agent's weights to the
// engines of the ranks outside the group, over a process group of itself and them. The
// leader also loads the agent's checkpoint and writes the agent's part of the next one,
// into the directory rank 0 makes: every leader must see rank 0's run directory (one
// machine, or a filesystem the nodes share), which the run checks at its start.

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/debate"
	"github.com/umad-dev/umad/internal/atomicfile"
	"github.com/umad-dev/umad/trainlog"
)

// grouped reports whether the agents train on groups of ranks.
func (t *Trainer) grouped() bool { return t.cfg.Placement.AgentRanks != nil }

// trains reports whether this rank holds agent i's training state.
func (t *Trainer) trains(i int) bool {
	return !t.grouped() || slices.Contains(t.cfg.Placement.AgentRanks[i], t.rank())
}

// group is the process group that agent i's training state is spread over: the job's, or
// with agent groups its group's; nil when that is this process alone.
func (t *Trainer) group(i int) *torch.Group {
	if !t.grouped() {
		return t.live.Group
	}
	return t.agents[i].group
}

// groupRank is this rank's place among the ranks that train agent i, and their number.
func (t *Trainer) groupRank(i int) (rank, world int) {
	if g := t.group(i); g != nil {
		return g.Rank(), g.World()
	}
	return 0, 1
}

// leads reports whether this rank is the first of those that train agent i: the one that
// loads its checkpoint, writes its part of the next and sends its weights outside the group.
func (t *Trainer) leads(i int) bool {
	if t.grouped() {
		return t.cfg.Placement.AgentRanks[i][0] == t.rank()
	}
	return t.lead()
}

// joinAgentGroups makes, for each agent in turn, the process group of its ranks (when it
// has several and this rank is one) and the one its leader serves the other ranks' engines
// over (when this rank is one of those). Every rank goes through the agents in the same
// order and a group forms once all its members reach it, so none waits on another forever.
func (t *Trainer) joinAgentGroups() error {
	if !t.grouped() {
		return nil
	}
	for i, ranks := range t.cfg.Placement.AgentRanks {
		st := t.agents[i]
		if t.trains(i) && len(ranks) > 1 {
			g, err := t.live.Group.Sub(fmt.Sprintf("agent-%d", i), ranks)
			if err != nil {
				return fmt.Errorf("agent %d: %w", i, err)
			}
			st.group = g
		}
		leader := ranks[0]
		served := []int{leader}
		for r := range t.world() {
			if !slices.Contains(ranks, r) {
				served = append(served, r)
			}
		}
		if len(served) == 1 || !slices.Contains(served, t.rank()) {
			continue
		}
		slices.Sort(served)
		g, err := t.live.Group.Sub(fmt.Sprintf("agent-%d-engines", i), served)
		if err != nil {
			return fmt.Errorf("agent %d: %w", i, err)
		}
		st.serve, st.serveRoot = g, slices.Index(served, leader)
	}
	return nil
}

// closeGroups leaves the agent groups, before the job's group closes.
func (st *agentState) closeGroups() {
	st.group.Close()
	st.serve.Close()
	st.group, st.serve = nil, nil
}

// firstError returns, on every rank, the first rank's error (in rank order) of those that
// failed, so that all stop together; nil when none did.
func (t *Trainer) firstError(err error) error {
	if t.live.Group == nil {
		return err
	}
	var mine []byte
	if err != nil {
		mine = []byte(err.Error())
	}
	parts, gerr := t.live.Group.AllGather(mine)
	if gerr != nil {
		return errors.Join(err, gerr)
	}
	for r, p := range parts {
		if len(p) > 0 {
			if r == t.rank() {
				return err
			}
			return fmt.Errorf("rank %d: %s", r, p)
		}
	}
	return nil
}

// SharedCheckFile is what rank 0 writes under RUN/ranks so that the agent groups' leaders
// can tell that they see its run directory.
const SharedCheckFile = "shared-check"

// shareRunDir checks that every agent group's leader sees the run directory rank 0 writes,
// and gives them rank 0's checkpoint ck to resume from (nil for a fresh run).
func (t *Trainer) shareRunDir(ck *checkpointInfo) (*checkpointInfo, error) {
	if !t.grouped() {
		return ck, nil
	}
	path := filepath.Join(t.cfg.Out, RanksDir, SharedCheckFile)
	var mine []byte
	var err error
	if t.lead() {
		nonce := make([]byte, 16)
		rand.Read(nonce)
		mine = []byte(hex.EncodeToString(nonce) + "\n")
		if ck != nil {
			mine = append(mine, []byte(ck.Dir)...)
		}
		if err = os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
			err = atomicfile.WriteBytes(path, mine)
		}
	}
	if err = t.firstError(err); err != nil {
		return nil, err
	}
	parts, err := t.live.Group.AllGather(mine)
	if err != nil {
		return nil, err
	}
	nonce, dir, _ := bytes.Cut(parts[0], []byte("\n"))
	for i := range t.cfg.Placement.AgentRanks {
		if err != nil || t.lead() || !t.leads(i) {
			continue
		}
		if b, rerr := os.ReadFile(path); rerr != nil || !bytes.HasPrefix(b, append(nonce, '\n')) {
			err = fmt.Errorf("--agent-ranks: rank %d leads agent %d but does not see rank 0's run directory %s, where it writes the agent's checkpoints: put --out on a filesystem every node shares", t.rank(), i, t.cfg.Out)
		}
	}
	if err = t.firstError(err); err != nil || len(dir) == 0 {
		return nil, err
	}
	return &checkpointInfo{Dir: string(dir), Step: t.step}, nil
}

// groupRecords gives this rank its share of the step's debates among agent's ranks: the
// debates are all-gathered (each rank rolled out its share of the job's), in the batch's order.
func (t *Trainer) groupRecords(local []debate.Record) ([]debate.Record, error) {
	if !t.grouped() {
		return local, nil
	}
	all, err := gatherJSON(t.live.Group, local)
	if err != nil {
		return nil, fmt.Errorf("gather the debates: %w", err)
	}
	for i := range t.cfg.Placement.AgentRanks {
		if t.trains(i) {
			r, n := t.groupRank(i)
			lo, hi := share(len(all), r, n)
			return all[lo:hi], nil
		}
	}
	return nil, errors.New("this rank trains no agent")
}

// groupLines gives every rank the step's metrics lines of every agent, in one process's
// order (turn, then agent), which the agents' leaders computed.
func (t *Trainer) groupLines(lines []trainlog.StepMetrics) ([]trainlog.StepMetrics, error) {
	if !t.grouped() {
		return lines, nil
	}
	var mine []trainlog.StepMetrics
	for _, l := range lines {
		if t.leads(l.Agent) {
			mine = append(mine, l)
		}
	}
	all, err := gatherJSON(t.live.Group, mine)
	if err != nil {
		return nil, fmt.Errorf("gather the metrics: %w", err)
	}
	slices.SortStableFunc(all, func(a, b trainlog.StepMetrics) int {
		return cmp.Or(cmp.Compare(a.Turn, b.Turn), cmp.Compare(a.Agent, b.Agent))
	})
	return all, nil
}
