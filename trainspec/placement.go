package trainspec

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Placement is where a run keeps its agents' training state: where each agent's model
// lives and what it trades for memory (ModelPlacement), the ZeRO stage over the ranks that
// train an agent, and which ranks train which agent. The zero value is one process on the
// CPU holding everything. config.json does not record it: a run resumes under any.
type Placement struct {
	ModelPlacement
	// Shard is the ZeRO stage over the ranks that train an agent: 0 replicates the training
	// state, 1 shards the AdamW moments, 2 the summed gradients too, 3 the weights too.
	Shard int
	// AgentRanks, when set, trains agent i on ranks AgentRanks[i] alone (every rank still
	// serves every agent's rollouts); nil trains every agent on every rank.
	AgentRanks [][]int
}

// ModelPlacement is where one model's tensors and training state live.
type ModelPlacement struct {
	Device Device
	// GradCheckpoint recomputes each layer in the backward instead of keeping its
	// activations.
	GradCheckpoint bool
	// Offload keeps the AdamW moments in host memory and updates them on the CPU, the
	// gradient brought to them and the weights sent back a chunk at a time (ZeRO-Offload).
	// On the CPU it changes nothing but adds those copies.
	Offload bool
}

// CheckShard refuses a ZeRO stage that cannot run with these settings: stage 3 shards a
// fully fine-tuned model's weights and gathers a layer again for its backward, which only
// a recomputing (checkpointed) backward does.
func (p Placement) CheckShard(loraRank int) error {
	switch {
	case p.Shard < 3:
		return nil
	case loraRank > 0:
		return errors.New("--shard 3 shards the weights of full fine-tuning; a LoRA run's training state is its adapters (use --shard 2)")
	case !p.GradCheckpoint:
		return errors.New("--shard 3 needs --grad-checkpoint: a layer's weights are gathered again for its backward, which recomputes the layer")
	}
	return nil
}

// EqualGroups gives each of agents an equal group of world's ranks, in agent order; nil
// when they do not divide.
func EqualGroups(world, agents int) [][]int {
	if agents < 1 || world%agents != 0 {
		return nil
	}
	per := world / agents
	groups := make([][]int, agents)
	for g := range groups {
		for r := range per {
			groups[g] = append(groups[g], g*per+r)
		}
	}
	return groups
}

// ParseAgentRanks reads --agent-ranks: one group of ranks per agent, in agent order,
// separated by commas; a group is a rank (3) or a range of ranks (0-3). The groups must
// not overlap and must leave no rank of the world without an agent.
func ParseAgentRanks(s string, agents, world int) ([][]int, error) {
	var groups [][]int
	for _, g := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(g), "-")
		a, err := strconv.Atoi(lo)
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(hi)
		}
		if err != nil || a < 0 || b < a {
			return nil, fmt.Errorf("--agent-ranks %q: %q is not a rank (3) or a range of ranks (0-3)", s, g)
		}
		if b >= world {
			return nil, fmt.Errorf("--agent-ranks %q: rank %d is outside the job's %d ranks (0-%d)", s, b, world, world-1)
		}
		var ranks []int
		for r := a; r <= b; r++ {
			ranks = append(ranks, r)
		}
		groups = append(groups, ranks)
	}
	return groups, CheckAgentRanks(groups, agents, world)
}

// FormatAgentRanks writes groups as --agent-ranks reads them; each group is a range.
func FormatAgentRanks(groups [][]int) string {
	var parts []string
	for _, g := range groups {
		s := strconv.Itoa(g[0])
		if len(g) > 1 {
			s += "-" + strconv.Itoa(g[len(g)-1])
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ",")
}

// CheckAgentRanks checks that groups give each of agents a group of increasing ranks, each
// of world's ranks in exactly one.
func CheckAgentRanks(groups [][]int, agents, world int) error {
	if len(groups) != agents {
		return fmt.Errorf("--agent-ranks: %d groups of ranks for %d agents (one group per agent, in agent order)", len(groups), agents)
	}
	owner := make([]int, world)
	for r := range owner {
		owner[r] = -1
	}
	for i, g := range groups {
		for j, r := range g {
			switch {
			case r < 0 || r >= world:
				return fmt.Errorf("--agent-ranks: rank %d is outside the job's %d ranks", r, world)
			case j > 0 && r <= g[j-1]:
				return fmt.Errorf("--agent-ranks: agent %d's ranks %v are not increasing", i, g)
			case owner[r] >= 0:
				return fmt.Errorf("--agent-ranks: rank %d is in the groups of agents %d and %d (the groups must not overlap)", r, owner[r], i)
			}
			owner[r] = i
		}
	}
	if r := slices.Index(owner, -1); r >= 0 {
		return fmt.Errorf("--agent-ranks: rank %d trains no agent (each of the %d ranks must be in one group)", r, world)
	}
	return nil
}
