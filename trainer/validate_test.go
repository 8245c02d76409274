package trainer

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/umad-dev/umad/debate"
	"github.com/umad-dev/umad/sampler"
)

// Validation samples every agent at the validation temperature, with the agent's other
// sampling settings, for ValTurns turns (Turns when 0); training keeps the agents' own.
func TestValidationSampling(t *testing.T) {
	temp := 0.6
	cfg := Config{Settings: Settings{Turns: 2, ValTemperature: &temp, Agents: []Agent{
		{Params: sampler.Params{Temperature: 0.8, TopP: 0.95, TopK: 20}},
		{Params: sampler.Params{Temperature: 1.0, TopP: 0.9, MinP: 0.05}},
	}}}
	for a, ag := range cfg.Agents {
		want := ag.Params
		want.Temperature = 0.6
		if got := cfg.valParams(a); got != want {
			t.Errorf("agent %d validates with %+v, want %+v", a, got, want)
		}
	}
	if cfg.Agents[0].Params.Temperature != 0.8 {
		t.Errorf("validation changed the training temperature to %g", cfg.Agents[0].Params.Temperature)
	}
	cfg.ValTemperature = nil // a Config built in Go, or a run from before the setting
	if got := cfg.valParams(1); got != cfg.Agents[1].Params {
		t.Errorf("without a validation temperature agent 1 validates with %+v, want its own %+v", got, cfg.Agents[1].Params)
	}
	if got := cfg.valTurns(); got != 2 {
		t.Errorf("validation turns %d, want --turns 2", got)
	}
	cfg.ValTurns = 3
	if got := cfg.valTurns(); got != 3 {
		t.Errorf("validation turns %d, want 3", got)
	}
}

// The prompt settings become the debate's message shape, with the rollout's seed.
func TestDebatePromptSettings(t *testing.T) {
	if got := (&Config{}).debatePrompt(7); got != (debate.Prompt{Seed: 7}) {
		t.Errorf("defaults give %+v, want the reference protocol", got)
	}
	cfg := Config{Settings: Settings{NoMask: true, FullHistory: true, Anonymise: true}}
	want := debate.Prompt{KeepAnswers: true, History: debate.HistoryFull, Anonymise: true, Seed: 9}
	if got := cfg.debatePrompt(9); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

// A config.json from before the validation temperature validated at the agents' own:
// it reads as that temperature when the agents share one (so a resume gives it as
// --val-temperature), else as none (the agents' own, which no flag gives).
func TestConfigBeforeValTemperature(t *testing.T) {
	for _, tc := range []struct {
		json string
		want string
	}{
		{`{"agents": [{"params": {"Temperature": 0.8}}, {"params": {"Temperature": 0.8}}]}`, "0.8"},
		{`{"agents": [{"params": {"Temperature": 0.8}}, {"params": {"Temperature": 1}}]}`, "none"},
		{`{"agents": [{"params": {"Temperature": 0.8}}], "val_temperature": 0}`, "0"},
	} {
		var c Config
		if err := json.Unmarshal([]byte(tc.json), &c); err != nil {
			t.Fatal(err)
		}
		got := "none"
		if c.ValTemperature != nil {
			got = fmt.Sprint(*c.ValTemperature)
		}
		if got != tc.want {
			t.Errorf("%s: validation temperature %s, want %s", tc.json, got, tc.want)
		}
	}
}
