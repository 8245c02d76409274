package arch

import (
	"strings"
	"testing"
)

// TestRegistry checks what the rest of umad assumes of the list: unique names and presets,
// every descriptor complete, and orders and GGUF names that read back.
func TestRegistry(t *testing.T) {
	presets := map[string]string{}
	orders := map[int]string{}
	for _, d := range All {
		if other, ok := orders[d.Order]; ok {
			t.Errorf("%s and %s share order %d", d.Name, other, d.Order)
		}
		orders[d.Order] = d.Name
		if got, ok := OfGGUF(d.GGUFArch()); !ok || got.GGUFArch() != d.GGUFArch() {
			t.Errorf("%s: its GGUF (%s) reads back as %s", d.Name, d.GGUFArch(), got.Name)
		}
		if got, err := Lookup(d.Name); err != nil || got.Name != d.Name {
			t.Errorf("Lookup(%s) = %v, %v", d.Name, got.Name, err)
		}
		if d.HFClass == "" || d.Chat.Family == "" || d.Tokenizer.Name == "" || d.Activation == "" || d.Tiny.Hidden == 0 {
			t.Errorf("%s: incomplete descriptor %+v", d.Name, d)
		}
		for p := range d.Presets {
			if other, ok := presets[p]; ok {
				t.Errorf("preset %s in %s and %s", p, other, d.Name)
			}
			presets[p] = d.Name
		}
	}
	if _, err := Lookup("gpt2"); err == nil || !strings.Contains(err.Error(), List()) {
		t.Errorf("Lookup(gpt2) = %v, want an error naming %s", err, List())
	}
}
