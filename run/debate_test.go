package run

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/umad-dev/umad/data"
	"github.com/umad-dev/umad/sampler"
)

// debateValue is a debate as a caller without flags builds it: two agents on the built-in
// problems, everything else at umad debate's defaults.
func debateValue() Debate {
	set := data.DefaultSynthetic
	agent := DebateAgent{Model: "/m.gguf", Params: sampler.Params{Temperature: 0.6, TopP: 0.95}, MaxTokens: 2048}
	return Debate{Settings: DebateSettings{Agents: []DebateAgent{agent, agent}, Synthetic: 20, SyntheticSet: &set,
		K: 4, Turns: 3, Seeds: []uint64{1}, PromptLimit: 5120, Mask: true, KVType: "f16", FlashAttn: "auto"}, Slots: 16, Out: "/tmp/x"}
}

// Resolve fills the protocol's defaults and sizes the context for the longest prompt plus
// the longest response, unless the context was given.
func TestDebateResolve(t *testing.T) {
	d := debateValue()
	d.Settings.Agents[1].MaxTokens = 4096
	d.Resolve()
	if s := d.Settings; s.Protocol != "trajectories" || s.Continue != "" || s.Ctx != 5120+4096 {
		t.Errorf("resolved protocol %q, continue %q, ctx %d; want trajectories, none, %d", s.Protocol, s.Continue, s.Ctx, 5120+4096)
	}
	d = debateValue()
	d.Settings.Protocol, d.Settings.Ctx, d.CtxGiven = "probe", 8192, true
	d.Resolve()
	if s := d.Settings; s.Continue != "sample" || s.Ctx != 8192 {
		t.Errorf("probe resolved continue %q, ctx %d; want sample, the given 8192", s.Continue, s.Ctx)
	}
	if err := d.Check(); err != nil {
		t.Errorf("a resolved probe debate: %v", err)
	}
}

// Check refuses what cannot run, naming the setting as its flag (an experiment file's key
// without the dashes).
func TestDebateCheck(t *testing.T) {
	for _, c := range []struct {
		change func(*Debate)
		want   string
	}{
		{func(d *Debate) { d.Settings.K = 0 }, "-k must be at least 1, got 0"},
		{func(d *Debate) { d.Settings.Turns = 0 }, "--turns must be at least 1, got 0"},
		{func(d *Debate) { d.Settings.Protocol, d.Settings.K = "probe", 1 }, "-k must be at least 2, got 1"},
		{func(d *Debate) { d.Settings.Continue = "greedy" }, "--continue chooses the probe protocol's continuations"},
		{func(d *Debate) { d.Settings.Protocol = "paths" }, `--protocol "paths": want one of [trajectories probe]`},
		{func(d *Debate) { d.Settings.Seeds = []uint64{1, 2, 1} }, "--seeds: seed 1 given twice"},
		{func(d *Debate) { d.Settings.Limit = 3 }, "--limit and --sample-ratio choose among the problems of --data"},
		{func(d *Debate) { d.Settings.Synthetic = 0 }, "--synthetic must be at least 1, got 0"},
		{func(d *Debate) { d.Slots = 0 }, "--slots"},
		{func(d *Debate) { d.Settings.KVType = "f8" }, "f8"},
	} {
		d := debateValue()
		c.change(&d)
		d.Resolve()
		if err := d.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Check = %v, want %q", err, c.want)
		}
	}
	d := debateValue()
	d.Resolve()
	if err := d.Check(); err != nil {
		t.Errorf("the default debate: %v", err)
	}
}

func TestParseDebateStopAndSeeds(t *testing.T) {
	var s DebateSettings
	if err := ParseDebateStop([]string{"agree=2", "eu=0.5"}, &s); err != nil || s.StopAgree != 2 || s.StopEU != 0.5 {
		t.Errorf("agree=2 eu=0.5: %+v, %v", s, err)
	}
	for _, bad := range []string{"agree=0", "eu=-1", "eu=inf", "never"} {
		if err := ParseDebateStop([]string{bad}, &s); err == nil || !strings.Contains(err.Error(), `--stop "`+bad+`"`) {
			t.Errorf("--stop %s: %v, want a refusal naming it", bad, err)
		}
	}
	if seeds, err := ParseDebateSeeds("1, 2,3"); err != nil || len(seeds) != 3 || seeds[1] != 2 {
		t.Errorf("1, 2,3: %v, %v", seeds, err)
	}
	if _, err := ParseDebateSeeds("1,x"); err == nil || !strings.Contains(err.Error(), `--seeds "1,x"`) {
		t.Errorf("1,x: %v, want a refusal naming --seeds", err)
	}
}

// config.json's keys and their order are a file format: resumes and --config read them.
func TestDebateSettingsJSON(t *testing.T) {
	b, err := json.Marshal(debateValue().Settings)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"agents":[{"name":"","model":"/m.gguf","params":{"Temperature":0.6,"TopK":0,"TopP":0.95,"MinP":0},"max_tokens":2048,"seed_offset":0},` +
		`{"name":"","model":"/m.gguf","params":{"Temperature":0.6,"TopK":0,"TopP":0.95,"MinP":0},"max_tokens":2048,"seed_offset":0}],` +
		`"data":"","synthetic":20,"synthetic_set":` + syntheticJSON(t) + `,"k":4,"protocol":"","turns":3,"seeds":[1],"prompt_limit":5120,` +
		`"mask":true,"full_history":false,"anonymise":false,"kv_type":"f16","flash_attn":"auto","ctx":0}`
	if string(b) != want {
		t.Errorf("config.json of a debate:\n got %s\nwant %s", b, want)
	}
	var back DebateSettings
	if err := json.Unmarshal([]byte(`{"k":2}`), &back); err != nil || back.Protocol != "trajectories" {
		t.Errorf("a config.json from before --protocol reads as protocol %q, %v; want trajectories", back.Protocol, err)
	}
}

func syntheticJSON(t *testing.T) string {
	b, err := json.Marshal(data.DefaultSynthetic)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
