package rollouts

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

type rec struct {
	N    int    `json:"n"`
	Text string `json:"text"`
}

func readAll(t *testing.T, path string) ([]rec, bool) {
	t.Helper()
	var out []rec
	torn, err := Read(path, func(l []byte) error {
		var r rec
		if err := json.Unmarshal(l, &r); err != nil {
			return err
		}
		out = append(out, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out, torn
}

func TestAppendReadRepair(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.jsonl.zst")
	if got, torn := readAll(t, path); len(got) != 0 || torn {
		t.Fatalf("missing file: %v %v", got, torn)
	}
	w, err := OpenAppend(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if err := w.Append(rec{i, "line\nwith newline"}); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	got, torn := readAll(t, path)
	if len(got) != 5 || torn || got[3].N != 3 || got[3].Text != "line\nwith newline" {
		t.Fatalf("read back %v torn=%v", got, torn)
	}
	// Cut the last frame in half, as a crash mid-append would.
	raw, _ := os.ReadFile(path)
	full := len(raw)
	for cut := 1; cut < 12; cut++ {
		os.WriteFile(path, raw[:full-cut], 0o644)
		got, torn = readAll(t, path)
		if len(got) != 4 || !torn {
			t.Fatalf("cut %d bytes: %d records, torn=%v; want 4 and torn", cut, len(got), torn)
		}
	}
	n, err := Repair(path)
	if err != nil || n != 4 {
		t.Fatalf("repair: %d, %v", n, err)
	}
	w, _ = OpenAppend(path)
	w.Append(rec{N: 9})
	w.Close()
	got, torn = readAll(t, path)
	if len(got) != 5 || torn || got[4].N != 9 {
		t.Fatalf("after repair and append: %v torn=%v", got, torn)
	}
}

func TestGarbageIsTorn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g.zst")
	os.WriteFile(path, []byte("not zstd at all"), 0o644)
	if got, torn := readAll(t, path); len(got) != 0 || !torn {
		t.Fatalf("garbage: %v torn=%v", got, torn)
	}
}

func TestWriteFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "r.jsonl.zst")
	if err := WriteFile(p, []rec{{1, "a"}, {2, "b"}, {3, "c"}}); err != nil {
		t.Fatal(err)
	}
	got, torn := readAll(t, p)
	if torn || len(got) != 3 || got[0].N != 1 || got[2].Text != "c" {
		t.Fatalf("read back %v (torn %v), want 3 records", got, torn)
	}
}
