package memplan

import (
	"fmt"
	"io"
	"strings"
)

// Write prints the plan as a table, one column per agent, then the peaks against the
// budget.
func (p *Plan) Write(w io.Writer, b Budget) {
	type row struct {
		name  string
		cells []string
	}
	var rows []row
	index := map[string]int{}
	add := func(name string, agent int, bytes int64) {
		i, ok := index[name]
		if !ok {
			i = len(rows)
			index[name] = i
			rows = append(rows, row{name: name, cells: make([]string, len(p.Agents))})
		}
		rows[i].cells[agent] = Size(bytes)
	}
	// Memory held all run first, then each phase's.
	for _, transient := range []bool{false, true} {
		for ai, ap := range p.Agents {
			for _, l := range ap.Lines {
				if (len(l.Phases) > 0) != transient {
					continue
				}
				name := "  " + l.Name
				if l.Device {
					name += " [GPU]"
				}
				if transient {
					name += " [" + strings.Join(l.Phases, ", ") + "]"
				}
				add(name, ai, l.Bytes)
			}
		}
	}
	width := len("process (Go, libtorch, llama.cpp)")
	for _, r := range rows {
		width = max(width, len(r.name))
	}
	agents := "1 agent"
	if len(p.Agents) > 1 {
		agents = fmt.Sprintf("%d agents", len(p.Agents))
	}
	fmt.Fprintf(w, "memory plan of %s (bracketed lines come and go, one agent at a time)\n", agents)
	fmt.Fprintf(w, "%-*s", width, "")
	cols := make([]int, len(p.Agents))
	for i, ap := range p.Agents {
		name := ap.Agent.Name
		if name == "" {
			name = fmt.Sprintf("agent %d", i)
		}
		cols[i] = max(12, len(name))
		fmt.Fprintf(w, "  %*s", cols[i], name)
	}
	fmt.Fprintln(w)
	for _, r := range rows {
		fmt.Fprintf(w, "%-*s", width, r.name)
		for i, c := range r.cells {
			if c == "" {
				c = "-"
			}
			fmt.Fprintf(w, "  %*s", cols[i], c)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "%-*s  %*s\n", width, "  process (Go, libtorch, llama.cpp)", cols[0], Size(p.Baseline))
	fmt.Fprintln(w, p.peakLine(false, b.Host, "available (MemAvailable)"))
	if dev, _, _ := p.Peak(true); dev > 0 || b.Device > 0 {
		fmt.Fprintln(w, p.peakLine(true, b.Device, "free on the GPUs"))
	}
}

func (p *Plan) peakLine(device bool, budget int64, what string) string {
	peak, agent, phase := p.Peak(device)
	where := "host"
	if device {
		where = "GPU"
	}
	s := fmt.Sprintf("peak %s: %s", where, Size(peak))
	if agent >= 0 {
		s += fmt.Sprintf(" (agent %d's %s)", agent, phase)
	}
	switch {
	case budget <= 0:
		return s + "; " + what + ": unknown"
	case peak > budget:
		return s + fmt.Sprintf(" of %s %s: does not fit", Size(budget), what)
	}
	return s + fmt.Sprintf(" of %s %s: fits", Size(budget), what)
}
