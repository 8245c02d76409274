package memplan

// Per-rank memory of a multi-process run (issue 32): how the ZeRO stages, one agent per
// group of ranks and AdamW state in host memory divide the training state over the ranks,
// and the cheapest placement that fits.

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// Placement is one way to hold the agents' training state over a run's ranks.
type Placement struct {
	Shard       int  // ZeRO stage: 1 shards the AdamW moments, 2 the gradients too, 3 the weights too
	AgentGroups bool // one agent per group of world/agents ranks
	Offload     bool // AdamW moments and their update in host memory
}

// Flags are the flags of `umad train` that ask for the placement of agents over world
// ranks.
func (p Placement) Flags(world, agents int) string {
	s := fmt.Sprintf("--shard %d", p.Shard)
	if p.AgentGroups {
		per := world / agents
		var groups []string
		for g := range agents {
			group := fmt.Sprint(g * per)
			if per > 1 {
				group += fmt.Sprintf("-%d", (g+1)*per-1)
			}
			groups = append(groups, group)
		}
		s += " --agent-ranks " + strings.Join(groups, ",")
	}
	if p.Offload {
		s += " --offload optimizer"
	}
	return s
}

// Placements are the placements of agents over world ranks, cheapest first: stages 1 and 2
// move an all-reduce's bytes (as ZeRO's reduce-scatter and all-gather), agent groups add a
// weight broadcast between groups per sync, stage 3 moves 1.5 times an all-reduce every
// step, and offload runs AdamW on the CPU. One process has only its offload.
func Placements(world, agents int) []Placement {
	stages := []int{0}
	if world > 1 {
		stages = []int{0, 1, 2, 3}
	}
	groups := []bool{false}
	if agents > 1 && world%agents == 0 {
		groups = append(groups, true)
	}
	var out []Placement
	for _, offload := range []bool{false, true} {
		for _, stage3 := range []bool{false, true} {
			for _, g := range groups {
				for _, s := range stages {
					if (s == 3) == stage3 {
						out = append(out, Placement{Shard: s, AgentGroups: g, Offload: offload})
					}
				}
			}
		}
	}
	return out
}

// Ranks are the plans of a rank of world under p, one per group of ranks with agent
// groups (the rank trains its group's agent and serves every agent's rollouts), else one.
func (p Placement) Ranks(agents []Agent, world int) ([]*Plan, error) {
	placed := slices.Clone(agents)
	for i := range placed {
		placed[i].Shard, placed[i].OffloadOptimizer, placed[i].ShardRanks = p.Shard, p.Offload, world
	}
	if !p.AgentGroups {
		pl, err := New(placed)
		return []*Plan{pl}, err
	}
	sizes := make([]int, len(agents))
	for i := range sizes {
		sizes[i] = world / len(agents)
	}
	return GroupRanks(placed, sizes)
}

// GroupRanks are the plans of a rank of each agent's group when agent i trains on sizes[i]
// ranks alone (its training state sharded over them as agents[i].Shard says) and every
// rank serves every agent's rollouts.
func GroupRanks(agents []Agent, sizes []int) ([]*Plan, error) {
	if len(sizes) != len(agents) {
		return nil, fmt.Errorf("%d groups of ranks for %d agents", len(sizes), len(agents))
	}
	var out []*Plan
	for g := range agents {
		placed := slices.Clone(agents)
		for i := range placed {
			placed[i].ShardRanks, placed[i].RolloutOnly = sizes[i], i != g
		}
		pl, err := New(placed)
		if err != nil {
			return nil, err
		}
		out = append(out, pl)
	}
	return out, nil
}

// RankPeaks are the host and device peaks of the busiest rank of world under p.
func (p Placement) RankPeaks(agents []Agent, world int) (host, dev int64, err error) {
	plans, err := p.Ranks(agents, world)
	if err != nil {
		return 0, 0, err
	}
	for _, pl := range plans {
		h, _, _ := pl.Peak(false)
		d, _, _ := pl.Peak(true)
		host, dev = max(host, h), max(dev, d)
	}
	return host, dev, nil
}

// fits reports whether peaks are within the budget (unknown budgets pass).
func (b Budget) fits(host, dev int64) bool {
	return (b.Host <= 0 || host <= b.Host) && (b.Device <= 0 || dev <= b.Device)
}

// Cheapest is the first placement of Placements whose busiest rank fits the per-rank
// budget b; ok is false when none does.
func Cheapest(agents []Agent, world int, b Budget) (p Placement, ok bool, err error) {
	for _, p := range Placements(world, len(agents)) {
		host, dev, err := p.RankPeaks(agents, world)
		if err != nil {
			return p, false, err
		}
		if b.fits(host, dev) {
			return p, true, nil
		}
	}
	return Placement{}, false, nil
}

// WritePlacements prints the busiest rank's peaks under every placement of agents over
// world ranks against the per-rank budget b, and the line naming the cheapest that fits.
func WritePlacements(w io.Writer, agents []Agent, world int, b Budget) error {
	fmt.Fprintf(w, "per rank of %d, each placement:\n", world)
	rows := Placements(world, len(agents))
	width := 0
	for _, p := range rows {
		width = max(width, len(p.Flags(world, len(agents))))
	}
	for _, p := range rows {
		host, dev, err := p.RankPeaks(agents, world)
		if err != nil {
			return err
		}
		verdict := "fits"
		if !b.fits(host, dev) {
			verdict = "does not fit"
		}
		fmt.Fprintf(w, "  %-*s  GPU %10s  host %10s  %s\n", width, p.Flags(world, len(agents)), Size(dev), Size(host), verdict)
	}
	line, err := CheapestLine(agents, world, b)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, line)
	return nil
}

// CheapestLine names the cheapest placement that fits, with its busiest rank's peaks, or
// says that none does.
func CheapestLine(agents []Agent, world int, b Budget) (string, error) {
	p, ok, err := Cheapest(agents, world, b)
	if err != nil || !ok {
		return fmt.Sprintf("no placement fits %d ranks: a smaller model, more ranks or larger ones", world), err
	}
	host, dev, err := p.RankPeaks(agents, world)
	if err != nil {
		return "", err
	}
	s := fmt.Sprintf("cheapest placement that fits %d ranks: %s (busiest rank: GPU %s, host %s)", world, p.Flags(world, len(agents)), Size(dev), Size(host))
	return s, nil
}
