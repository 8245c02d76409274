package bench

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ProfileEnv is the variable that makes the torch plugin write one Chrome trace per
// traced call (logprobs, policy_loss, sft_loss, optim_step) into the directory it names,
// as NNNNNN-CALL.json in call order (kernels/umad_profile.cpp).
const ProfileEnv = "UMAD_TORCH_PROFILE"

// traceEvent is one complete event ("ph": "X") of libtorch's legacy profiler trace.
type traceEvent struct {
	Name  string  `json:"name"`
	Phase string  `json:"ph"`
	TS    float64 `json:"ts"`  // microseconds from the trace's start
	Dur   float64 `json:"dur"` // microseconds
	TID   any     `json:"tid"`
}

// OpTime is one op's self time (its own, less the ops it called) over a phase's calls.
type OpTime struct {
	Name    string
	Calls   int
	Seconds float64
}

// PhaseProfile is where one phase's traced calls spent their time.
type PhaseProfile struct {
	Name    string
	Calls   int     // traced plugin calls
	Seconds float64 // their wall time, first op's start to last op's end
	Ops     []OpTime
}

// Untraced is the phase's time outside every op on the calls' main threads: the plugin's
// own code between ops, and waits.
func (p PhaseProfile) Untraced() float64 {
	s := p.Seconds
	for _, o := range p.Ops {
		s -= o.Seconds
	}
	return s
}

// LastStepProfile reads the traces in dir and profiles the last optimizer step's calls,
// the step umad bench train reports: the log-probs phase (logprobs calls, the reference's
// included) and the update (policy_loss and optim_step calls).
func LastStepProfile(dir string) ([]PhaseProfile, error) {
	files, err := filepath.Glob(filepath.Join(dir, "[0-9][0-9][0-9][0-9][0-9][0-9]-*.json"))
	if err != nil {
		return nil, err
	}
	slices.Sort(files)
	var steps []int
	for i, f := range files {
		if strings.HasSuffix(f, "-optim_step.json") {
			steps = append(steps, i)
		}
	}
	if len(steps) == 0 {
		return nil, fmt.Errorf("%s: no optimizer step was traced (is the plugin built with umad_profile.cpp?)", dir)
	}
	from := 0
	if len(steps) > 1 {
		from = steps[len(steps)-2] + 1
	}
	phases := []PhaseProfile{{Name: "log-probs"}, {Name: "update"}}
	for _, f := range files[from : steps[len(steps)-1]+1] {
		p := &phases[1]
		if strings.HasSuffix(f, "-logprobs.json") {
			p = &phases[0]
		}
		if err := p.add(f); err != nil {
			return nil, err
		}
	}
	for i := range phases {
		slices.SortFunc(phases[i].Ops, func(a, b OpTime) int { return cmp.Compare(b.Seconds, a.Seconds) })
	}
	return phases, nil
}

// add reads one call's trace into the phase.
func (p *PhaseProfile) add(file string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var events []traceEvent
	if err := json.Unmarshal(b, &events); err != nil {
		return fmt.Errorf("%s: not a profiler trace: %w", file, err)
	}
	self, wall := selfTimes(events)
	p.Calls++
	p.Seconds += wall / 1e6
	for name, t := range self {
		at := slices.IndexFunc(p.Ops, func(o OpTime) bool { return o.Name == name })
		if at < 0 {
			p.Ops = append(p.Ops, OpTime{Name: name})
			at = len(p.Ops) - 1
		}
		p.Ops[at].Calls += t.calls
		p.Ops[at].Seconds += t.us / 1e6
	}
	return nil
}

type selfTime struct {
	calls int
	us    float64
}

// selfTimes is each op's time less its children's, from the events' nesting on each
// thread, and the trace's span in microseconds.
func selfTimes(events []traceEvent) (map[string]selfTime, float64) {
	byThread := map[string][]traceEvent{}
	lo, hi := 0.0, 0.0
	for i, e := range events {
		if e.Phase != "X" {
			continue
		}
		tid := fmt.Sprint(e.TID)
		byThread[tid] = append(byThread[tid], e)
		if i == 0 || e.TS < lo {
			lo = e.TS
		}
		hi = max(hi, e.TS+e.Dur)
	}
	out := map[string]selfTime{}
	for _, evs := range byThread {
		// A parent starts no later and lasts longer than its children.
		slices.SortStableFunc(evs, func(a, b traceEvent) int {
			return cmp.Or(cmp.Compare(a.TS, b.TS), cmp.Compare(b.Dur, a.Dur))
		})
		type open struct {
			name     string
			end, own float64
		}
		var stack []open
		closeTop := func() {
			top := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			t := out[top.name]
			t.calls++
			t.us += max(top.own, 0)
			out[top.name] = t
		}
		for _, e := range evs {
			for len(stack) > 0 && stack[len(stack)-1].end <= e.TS {
				closeTop()
			}
			if len(stack) > 0 {
				stack[len(stack)-1].own -= e.Dur
			}
			stack = append(stack, open{e.Name, e.TS + e.Dur, e.Dur})
		}
		for len(stack) > 0 {
			closeTop()
		}
	}
	return out, hi - lo
}

// ProfileTable prints each phase's top ops by self time, with the rest and the untraced
// time, as Markdown.
func ProfileTable(phases []PhaseProfile, top int) string {
	var b strings.Builder
	for _, p := range phases {
		if p.Calls == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n%s: %d calls, %.4f s (libtorch's profiler on; self time of each op, less the ops it called)\n\n", p.Name, p.Calls, p.Seconds)
		b.WriteString("| op | calls | seconds | share |\n|---|---|---|---|\n")
		row := func(name string, calls int, s float64) {
			fmt.Fprintf(&b, "| %s | %d | %.4f | %.1f%% |\n", name, calls, s, 100*s/p.Seconds)
		}
		rest, restCalls := 0.0, 0
		for i, o := range p.Ops {
			if i < top {
				row(o.Name, o.Calls, o.Seconds)
				continue
			}
			rest += o.Seconds
			restCalls += o.Calls
		}
		if restCalls > 0 {
			row(fmt.Sprintf("%d other ops", len(p.Ops)-top), restCalls, rest)
		}
		fmt.Fprintf(&b, "| outside every op | - | %.4f | %.1f%% |\n", p.Untraced(), 100*p.Untraced()/p.Seconds)
	}
	return b.String()
}
