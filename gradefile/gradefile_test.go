package gradefile

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/umad-dev/umad/grade"
	"github.com/umad-dev/umad/verifier"
)

// A line the verifier decided says so: rule verifier, its verdict, and robust+verifier's
// count; robust's own field is unchanged.
func TestGradeVerifierFields(t *testing.T) {
	opt := Options{ResponseField: "response", PredField: "pred", GoldField: "gold", QuestionField: "question", Verifier: &verifier.Session{}}
	for _, c := range []struct {
		check    grade.Check
		rule     string
		verified int
	}{{grade.CheckEqual, "verifier", 1}, {grade.CheckNotEqual, "verifier", 0}, {grade.CheckUndecided, "none", 0}, {grade.CheckSkipped, "none", 0}} {
		g, err := opt.gradeLine(1, []byte(`{"question": "How many?", "pred": "three", "gold": "3"}`))
		if err != nil || !g.ask || g.question != "How many?" {
			t.Fatalf("gradeLine: %+v, %v", g, err)
		}
		g.v.Verifier = c.check
		stats := Stats{check: opt.Verifier}
		b, err := g.finish(&stats)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if m["rule"] != c.rule || m["verifier"] != string(c.check) || m["robust"] != false || stats.verified != c.verified {
			t.Errorf("%s: %v, %d verified", c.check, m, stats.verified)
		}
	}
}

// FuzzGradeLine: any line either fails with an error or comes back as one JSON object
// line with every input field and the four verdict fields.
func FuzzGradeLine(f *testing.F) {
	f.Add(`{"id": 1, "response": "The total is \\boxed{1,000}.", "gold": "1000"}`)
	f.Add(`{"id": 6, "pred": 27, "gold": 27.0}`)
	f.Add(`{"id": 8, "response": null, "gold": "3"}`)
	f.Add(`{"a": {"b": [1, "}"]}, "pred": "\u00e9", "gold": 1e400}`)
	f.Add(`{"gold": "1", "pred": "1", "gold": "2"}`)
	opt := Options{ResponseField: "response", PredField: "pred", GoldField: "gold"}
	f.Fuzz(func(t *testing.T, line string) {
		var stats Stats
		g, err := opt.gradeLine(1, []byte(line))
		if err != nil {
			return
		}
		out, err := g.finish(&stats)
		if err != nil {
			t.Fatalf("graded line %q failed to write: %v", line, err)
		}
		if !bytes.HasSuffix(out, []byte("}\n")) || bytes.Count(out, []byte("\n")) != 1 {
			t.Fatalf("not one line: %q", out)
		}
		var in, got map[string]json.RawMessage
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("output %q is not a JSON object: %v", out, err)
		}
		if err := json.Unmarshal([]byte(line), &in); err != nil {
			t.Fatalf("input %q was graded but is not a JSON object: %v", line, err)
		}
		for k := range in {
			if _, ok := got[k]; !ok {
				t.Fatalf("field %q lost: %q", k, out)
			}
		}
		for _, k := range []string{"extracted", "key", "strict", "robust"} {
			if _, ok := got[k]; !ok {
				t.Fatalf("no %q in %q", k, out)
			}
		}
	})
}
