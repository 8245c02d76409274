package run

import "testing"

// A run directory with other settings names the first one that differs, with both values.
func TestConfigDiff(t *testing.T) {
	for _, c := range []struct{ old, cur, want string }{
		{`{"trainer":{"optimizer":{"lr":0.001},"steps":2}}`, `{"trainer":{"optimizer":{"lr":0.002},"steps":2}}`, "trainer.optimizer.lr: 0.001 there, 0.002 here"},
		{`{"agents":[{"model":"a"},{"model":"b"}]}`, `{"agents":[{"model":"a"},{"model":"c"}]}`, `agents[1].model: "b" there, "c" here`},
		{`{"k":2}`, `{"k":2,"recipe":{"name":"paper"}}`, `recipe: unset there, {"name":"paper"} here`},
		{`{"seeds":[1]}`, `{"seeds":[1,2]}`, "seeds: [1] there, [1,2] here"},
	} {
		if got := ConfigDiff([]byte(c.old), []byte(c.cur)); got != c.want {
			t.Errorf("ConfigDiff(%s, %s) = %q, want %q", c.old, c.cur, got, c.want)
		}
	}
}
