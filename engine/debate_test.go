package engine_test

import (
	"encoding/json"
	"testing"

	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/reward"
)

// The rollout files' JSON of a turn, grade object included, is a file format: its keys
// and their order must not change.
func TestAgentTurnJSON(t *testing.T) {
	ans := "5"
	at := engine.AgentTurn{Prompt: "q", PromptTokens: []int32{1}, Text: `\boxed{5}`, Tokens: []int32{2, 3},
		LogProbs: []float32{-0.5, -1}, Entropies: []float32{1, 0.5}, Finish: engine.FinishLength, Answer: &ans,
		Grade: reward.Verdict{Key: "5", Strict: true, Robust: true, Tokens: 2, Truncated: true, Boxed: true,
			MeanEntropy: 0.75, MeanNLL: 0.75}}
	want := `{"prompt":"q","prompt_tokens":[1],"text":"\\boxed{5}","tokens":[2,3],"logprobs":[-0.5,-1],` +
		`"entropies":[1,0.5],"finish":"length","answer":"5","grade":{"key":"5","strict":true,"robust":true,` +
		`"tokens":2,"truncated":true,"boxed":true,"mean_entropy":0.75,"mean_nll":0.75}}`
	got, err := json.Marshal(at)
	if err != nil || string(got) != want {
		t.Errorf("AgentTurn JSON:\n got %s (%v)\nwant %s", got, err, want)
	}
	none, _ := json.Marshal(reward.Verdict{NoAnswer: true})
	if want := `{"no_answer":true,"strict":false,"robust":false,"tokens":0,"mean_entropy":0,"mean_nll":0}`; string(none) != want {
		t.Errorf("no-answer grade JSON:\n got %s\nwant %s", none, want)
	}
}
