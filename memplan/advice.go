package memplan

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// A change is one way to need less memory; apply changes an agent and reports whether it
// applied (a run on LoRA already cannot switch to it).
type change struct {
	label func(Agent) string
	apply func(*Agent) bool
}

// changes are the remedies the advice weighs, each applied to every agent and labelled
// with the flags of `umad train` that make it.
var changes = []change{
	{func(Agent) string { return "--lora-rank 16 --lora-bf16-base" }, func(a *Agent) bool {
		if a.lora() {
			return false
		}
		a.LoRA = LoRA{Rank: 16, BaseDType: BF16}
		return true
	}},
	{func(a Agent) string {
		if a.lora() {
			return "--lora-bf16-base"
		}
		return "--dtype bf16"
	}, func(a *Agent) bool {
		switch {
		case a.lora() && a.baseDType() != BF16:
			a.LoRA.BaseDType = BF16
		case !a.lora() && a.DType != BF16:
			a.DType = BF16
		default:
			return false
		}
		return true
	}},
	{func(a Agent) string { return fmt.Sprintf("-g %d", max(1, a.MicroBatchSeqs/2)) }, func(a *Agent) bool {
		if a.MicroBatchSeqs < 2 {
			return false
		}
		a.MicroBatchSeqs /= 2
		return true
	}},
	{func(a Agent) string { return fmt.Sprintf("--slots %d", max(1, a.Slots/2)) }, func(a *Agent) bool {
		if a.Slots < 2 {
			return false
		}
		a.Slots /= 2
		return true
	}},
	// A shorter prompt limit shrinks the activations and, unless --ctx sets it, the KV cache.
	{func(a Agent) string { return fmt.Sprintf("--prompt-limit %d", max(1, a.PromptTokens/2)) }, func(a *Agent) bool {
		if a.PromptTokens < 2 {
			return false
		}
		a.PromptTokens /= 2
		return true
	}},
	{func(Agent) string { return "--grad-checkpoint" }, func(a *Agent) bool {
		if a.GradCheckpoint {
			return false
		}
		a.GradCheckpoint = true
		return true
	}},
}

// peaks plans the agents and returns the host and device peaks.
func peaks(agents []Agent) (host, dev int64, err error) {
	p, err := New(agents)
	if err != nil {
		return 0, 0, err
	}
	host, _, _ = p.Peak(false)
	dev, _, _ = p.Peak(true)
	return host, dev, nil
}

// need is the memory over the budget, host and device together.
func need(agents []Agent, b Budget) (int64, error) {
	host, dev, err := peaks(agents)
	var over int64
	if b.Host > 0 {
		over += max(0, host-b.Host)
	}
	if b.Device > 0 {
		over += max(0, dev-b.Device)
	}
	return over, err
}

// Advice is one line for a run that does not fit: the changes that save memory, largest
// saving first, and how many of them together make it fit. It is "" when the run fits.
func Advice(agents []Agent, b Budget) (string, error) {
	over, err := need(agents, b)
	if err != nil || over == 0 {
		return "", err
	}
	host, dev, err := peaks(agents)
	if err != nil {
		return "", err
	}
	type option struct {
		c     change
		label string
		saves int64
	}
	var opts []option
	for _, c := range changes {
		changed := slices.Clone(agents)
		applied := false
		for i := range changed {
			applied = c.apply(&changed[i]) || applied
		}
		h, d, err := peaks(changed)
		if err != nil {
			return "", err
		}
		// Ranked by host and device memory together.
		if saves := host + dev - h - d; applied && saves > 0 {
			opts = append(opts, option{c, c.label(agents[0]), saves})
		}
	}
	slices.SortStableFunc(opts, func(x, y option) int { return cmp.Compare(y.saves, x.saves) })
	var parts []string
	fitsAfter := 0
	changed := slices.Clone(agents)
	for i, o := range opts {
		parts = append(parts, fmt.Sprintf("%s (-%s)", o.label, Size(o.saves)))
		for j := range changed {
			o.c.apply(&changed[j])
		}
		if left, _ := need(changed, b); fitsAfter == 0 && left == 0 {
			fitsAfter = i + 1
		}
	}
	if len(parts) == 0 {
		return fmt.Sprintf("the run needs %s more than there is, and no setting saves memory: a smaller model or a larger machine", Size(over)), nil
	}
	s := fmt.Sprintf("the run needs %s more than there is; change, largest saving first: %s", Size(over), strings.Join(parts, ", "))
	if fitsAfter > 0 {
		return s + fmt.Sprintf("; the first %d together fit", fitsAfter), nil
	}
	left, _ := need(changed, b)
	return s + fmt.Sprintf("; all together still need %s more: a smaller model or a larger machine", Size(left)), nil
}
