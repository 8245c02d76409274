package memplan

// Per-rank memory of a multi-process run (issue 32): how the ZeRO stages, one agent per
// group of ranks and AdamW state in host memory divide the training state over the ranks,
// and the cheapest placement that fits.

import (
	"fmt"
	"io"
	"slices"

	"github.com/umad-dev/umad/trainspec"
)

// Placements are the placements of agents over world ranks, cheapest first: stages 1 and 2
// move an all-reduce's bytes (as ZeRO's reduce-scatter and all-gather), agent groups (equal
// ones, in agent order) add a weight broadcast between groups per sync, stage 3 moves 1.5
// times an all-reduce every step, and offload runs AdamW on the CPU. One process has only
// its offload. They vary the stage, the groups and the offload; the agents keep their
// device and checkpointing.
func Placements(world, agents int) []trainspec.Placement {
	stages := []int{0}
	if world > 1 {
		stages = []int{0, 1, 2, 3}
	}
	groups := [][][]int{nil}
	if agents > 1 {
		if g := trainspec.EqualGroups(world, agents); g != nil {
			groups = append(groups, g)
		}
	}
	var out []trainspec.Placement
	for _, offload := range []bool{false, true} {
		for _, stage3 := range []bool{false, true} {
			for _, g := range groups {
				for _, s := range stages {
					if (s == 3) == stage3 {
						p := trainspec.Placement{Shard: s, AgentRanks: g}
						p.Offload = offload
						out = append(out, p)
					}
				}
			}
		}
	}
	return out
}

// flags are the flags of `umad train` that ask for placement p.
func flags(p trainspec.Placement) string {
	s := fmt.Sprintf("--shard %d", p.Shard)
	if p.AgentRanks != nil {
		s += " --agent-ranks " + trainspec.FormatAgentRanks(p.AgentRanks)
	}
	if p.Offload {
		s += " --offload optimizer"
	}
	return s
}

// Place gives every agent p's stage and offload over all world ranks (agent groups are
// Ranks' to apply).
func Place(agents []Agent, p trainspec.Placement, world int) []Agent {
	placed := slices.Clone(agents)
	for i := range placed {
		placed[i].Shard, placed[i].Offload, placed[i].ShardRanks = p.Shard, p.Offload, world
	}
	return placed
}

// Ranks are the plans of a rank of world under p's stage, groups and offload, one per
// group of ranks with agent groups (the rank trains its group's agent and serves every
// agent's rollouts), else one.
func Ranks(agents []Agent, p trainspec.Placement, world int) ([]*Plan, error) {
	placed := Place(agents, p, world)
	if p.AgentRanks == nil {
		pl, err := New(placed)
		return []*Plan{pl}, err
	}
	if len(p.AgentRanks) != len(agents) {
		return nil, fmt.Errorf("%d groups of ranks for %d agents", len(p.AgentRanks), len(agents))
	}
	var out []*Plan
	for g := range agents {
		placed := slices.Clone(placed)
		for i := range placed {
			placed[i].ShardRanks, placed[i].RolloutOnly = len(p.AgentRanks[i]), i != g
		}
		pl, err := New(placed)
		if err != nil {
			return nil, err
		}
		out = append(out, pl)
	}
	return out, nil
}

// RankPlan is the plan of a rank of world under p: with agent groups, a rank of the group
// whose plan peaks highest (on the GPU, then on the host).
func RankPlan(agents []Agent, p trainspec.Placement, world int) (*Plan, error) {
	plans, err := Ranks(agents, p, world)
	if err != nil {
		return nil, err
	}
	busiest := plans[0]
	for _, pl := range plans[1:] {
		dev, _, _ := pl.Peak(true)
		most, _, _ := busiest.Peak(true)
		host, _, _ := pl.Peak(false)
		mostHost, _, _ := busiest.Peak(false)
		if dev > most || dev == most && host > mostHost {
			busiest = pl
		}
	}
	return busiest, nil
}

// RankPeaks are the host and device peaks of the busiest rank of world under p.
func RankPeaks(agents []Agent, p trainspec.Placement, world int) (host, dev int64, err error) {
	plans, err := Ranks(agents, p, world)
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
func Cheapest(agents []Agent, world int, b Budget) (p trainspec.Placement, ok bool, err error) {
	for _, p := range Placements(world, len(agents)) {
		host, dev, err := RankPeaks(agents, p, world)
		if err != nil {
			return p, false, err
		}
		if b.fits(host, dev) {
			return p, true, nil
		}
	}
	return trainspec.Placement{}, false, nil
}

// WritePlacements prints the busiest rank's peaks under every placement of agents over
// world ranks against the per-rank budget b, and the line naming the cheapest that fits.
func WritePlacements(w io.Writer, agents []Agent, world int, b Budget) error {
	fmt.Fprintf(w, "per rank of %d, each placement:\n", world)
	rows := Placements(world, len(agents))
	width := 0
	for _, p := range rows {
		width = max(width, len(flags(p)))
	}
	for _, p := range rows {
		host, dev, err := RankPeaks(agents, p, world)
		if err != nil {
			return err
		}
		verdict := "fits"
		if !b.fits(host, dev) {
			verdict = "does not fit"
		}
		fmt.Fprintf(w, "  %-*s  GPU %10s  host %10s  %s\n", width, flags(p), Size(dev), Size(host), verdict)
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
	host, dev, err := RankPeaks(agents, p, world)
	if err != nil {
		return "", err
	}
	s := fmt.Sprintf("cheapest placement that fits %d ranks: %s (busiest rank: GPU %s, host %s)", world, flags(p), Size(dev), Size(host))
	return s, nil
}
