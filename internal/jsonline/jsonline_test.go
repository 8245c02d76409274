package jsonline

import (
	"strings"
	"testing"
)

// TestSetKeepsTheLine replaces a value where it stands, appends a new field, and leaves
// every other byte of the line (spacing, key order, number spelling) as it was.
func TestSetKeepsTheLine(t *testing.T) {
	o, err := Parse([]byte(`{ "gold" : "3",  "x": 1.50, "gold": "x<3" }`))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := o.Get("gold"); !ok || string(v) != `"x<3"` {
		t.Errorf("Get(gold) = %s, %v: the last of duplicate keys wins", v, ok)
	}
	if err := o.Set("gold", "y<4"); err != nil {
		t.Fatal(err)
	}
	if err := o.Set("verdict", map[string]bool{"strict": true}); err != nil {
		t.Fatal(err)
	}
	want := `{ "gold" : "3",  "x": 1.50, "gold": "y<4" ,"verdict":{"strict":true}}` + "\n"
	if got := string(o.Marshal()); got != want {
		t.Errorf("Marshal =\n%s want\n%s", got, want)
	}
	if got := o.Keys(); got != "gold, x, gold" {
		t.Errorf("Keys = %q", got)
	}
}

// TestParseRefuses names what is wrong with a line that is not one JSON object.
func TestParseRefuses(t *testing.T) {
	for line, want := range map[string]string{
		`[1]`:         "not a JSON object",
		`{"a": 1} {}`: "data after the object",
		`{"a": }`:     "invalid JSON",
	} {
		if _, err := Parse([]byte(line)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%s) = %v, want %q", line, err, want)
		}
	}
	if o, err := Parse([]byte(`{}`)); err != nil || o.Keys() != "none" || string(o.Marshal()) != "{}\n" {
		t.Errorf("empty object: %v", err)
	}
}

// TestMarshalRepairsUTF8 writes invalid UTF-8 inside a string as U+FFFD, as decoders read it.
func TestMarshalRepairsUTF8(t *testing.T) {
	o, err := Parse([]byte("{\"a\": \"\xff\"}"))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(o.Marshal()); got != "{\"a\": \"\uFFFD\"}\n" {
		t.Errorf("Marshal = %q", got)
	}
}
