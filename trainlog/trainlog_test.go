package trainlog

import (
	"os"
	"path/filepath"
	"testing"
)

func TestOpenDropsLaterSteps(t *testing.T) {
	p := filepath.Join(t.TempDir(), File)
	lines := `{"kind":"val","step":0}
{"kind":"train","step":1}
{"kind":"train","step":2}
{"kind":"train","step":3}
{"kind":"tra`
	if err := os.WriteFile(p, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := Open(p, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Append(map[string]int{"step": 3}); err != nil {
		t.Fatal(err)
	}
	m.Close()
	b, _ := os.ReadFile(p)
	want := `{"kind":"val","step":0}
{"kind":"train","step":1}
{"kind":"train","step":2}
{"step":3}
`
	if string(b) != want {
		t.Errorf("metrics after resume at step 2:\n%s\nwant (step 3 and the torn line dropped, new step 3 appended):\n%s", b, want)
	}
}

func TestRead(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, File)
	os.WriteFile(p, []byte(`{"kind":"val","step":0,"accuracy":[[0.5]]}
{"kind":"train","step":1,"agent":0,"accuracy":0.25}
{"kind":"train","st`), 0o644)
	train, val, err := Read(p)
	if err != nil || len(train) != 1 || len(val) != 1 || train[0].Accuracy != 0.25 || val[0].Accuracy[0][0] != 0.5 {
		t.Fatalf("Read: %+v %+v %v; want one line of each and the torn last line ignored", train, val, err)
	}
	os.WriteFile(p, []byte("{\"kind\":\"train\",\"st\n{\"kind\":\"val\",\"step\":0}\n"), 0o644)
	if _, _, err := Read(p); err == nil {
		t.Error("a bad line that is not the last must be an error")
	}
	os.WriteFile(p, []byte("{\"kind\":\"other\"}\n"), 0o644)
	if _, _, err := Read(p); err == nil {
		t.Error("an unknown kind must be an error")
	}
}
