package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/umad-dev/umad/peft"
)

// snapshot reads every file under dir, by path.
func snapshot(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(path)
		files[path] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// sameFiles fails the test unless dir holds exactly the files of want, byte for byte.
func sameFiles(t *testing.T, dir string, want map[string][]byte) {
	t.Helper()
	got := snapshot(t, dir)
	for path, b := range want {
		if g, ok := got[path]; !ok || !bytes.Equal(g, b) {
			t.Errorf("%s was removed or changed", path)
		}
	}
	for path := range got {
		if _, ok := want[path]; !ok {
			t.Errorf("%s was written among the inputs", path)
		}
	}
}

// An output that is, holds or lies inside an input is refused before anything is written:
// `lora2hf CK CK --force` left CK holding only the merged model, `export --merge CK BASE
// --force` removed the base's files and then failed to read them, and `lora2gguf A
// OUT.gguf --base OUT.gguf` wrote the adapter over its base.
func TestOutputMayNotOverlapAnInput(t *testing.T) {
	base, adapter := trainedPEFT(t) // DIR/hf and DIR/adapter, the GGUF in DIR/model.gguf
	dir := filepath.Dir(base)
	baseGGUF := filepath.Join(dir, "model.gguf")
	// A LoRA run's checkpoint: the adapter beside its optimizer state and merged GGUF.
	for _, f := range []string{"optimizer.safetensors", "model.gguf"} {
		if err := os.WriteFile(filepath.Join(adapter, f), []byte("checkpoint "+f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(t.TempDir(), "base-link")
	if err := os.Symlink(base, link); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dir)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"convert", "lora2hf", adapter, adapter, "--force"}, "is the input " + adapter},
		{[]string{"export", "--merge", adapter, base, "--force"}, "is the input " + base},
		{[]string{"export", "--merge", adapter, link, "--force"}, "is the input " + base},
		{[]string{"convert", "lora2hf", adapter, dir, "--force"}, "contains the input"},
		{[]string{"convert", "lora2hf", adapter, filepath.Join(adapter, "merged")}, "lies inside the input " + adapter},
		{[]string{"convert", "lora2hf", adapter, filepath.Join(link, "merged"), "--base", base}, "lies inside the input " + base},
		{[]string{"convert", "lora2gguf", adapter, baseGGUF, "--base", baseGGUF}, "is the input " + baseGGUF},
		{[]string{"convert", "lora2gguf", adapter, filepath.Join(adapter, "model.gguf"), "--base", baseGGUF}, "lies inside the input " + adapter},
		{[]string{"convert", "hf2gguf", base, filepath.Join(base, "model.safetensors")}, "lies inside the input " + base},
		{[]string{"convert", "gguf2hf", baseGGUF, dir, "--force"}, "contains the input " + baseGGUF},
		{[]string{"model", "tiny", "--tokenizer", base, "--out", dir, "--force"}, "contains the input " + base},
	} {
		var stderr bytes.Buffer
		code := runWithApp(c.args, &stderr)
		msg := strings.TrimSpace(stderr.String())
		if code != 1 || strings.Count(msg, "\n") != 0 || !strings.Contains(msg, c.want) {
			t.Errorf("%q: exit %d, stderr %q: want exit 1 and one line containing %q", c.args, code, msg, c.want)
		}
	}
	sameFiles(t, dir, before)
}

// --force replaces the model files of the output directory and keeps the others: lora2hf
// replaced the whole directory.
func TestForceKeepsOtherFiles(t *testing.T) {
	_, adapter := trainedPEFT(t)
	out := t.TempDir()
	stale := filepath.Join(out, "model-00001-of-00002.safetensors")
	for path, b := range map[string]string{stale: "old shard", filepath.Join(out, "notes.txt"): "mine"} {
		if err := os.WriteFile(path, []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, stderr, err := runApp(t, "convert", "lora2hf", adapter, out, "--force"); err != nil {
		t.Fatalf("lora2hf --force: %v\n%s", err, stderr)
	}
	if b, err := os.ReadFile(filepath.Join(out, "notes.txt")); err != nil || string(b) != "mine" {
		t.Errorf("--force removed or changed a file that is not the model's: %q, %v", b, err)
	}
	if _, err := os.Stat(stale); err == nil {
		t.Error("--force kept an old shard")
	}
	if _, err := os.Stat(filepath.Join(out, "model.safetensors")); err != nil {
		t.Errorf("no merged model: %v", err)
	}
}

// An empty path named the working directory and failed only after the conversion, with
// "rename ./.tmpN" or "mkdir :".
func TestConvertRefusesEmptyPaths(t *testing.T) {
	_, adapter := trainedPEFT(t)
	gguf := filepath.Join(filepath.Dir(adapter), "model.gguf")
	hf := filepath.Join(filepath.Dir(adapter), "hf")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"convert", "hf2gguf", hf, ""}, "hf2gguf: OUT.gguf is empty"},
		{[]string{"convert", "gguf2hf", gguf, ""}, "gguf2hf: DIR is empty"},
		{[]string{"convert", "lora2gguf", adapter, "", "--base", gguf}, "lora2gguf: OUT.gguf is empty"},
		{[]string{"convert", "lora2hf", "", t.TempDir()}, "lora2hf: PEFT_DIR is empty"},
	} {
		var stderr bytes.Buffer
		code := runWithApp(c.args, &stderr)
		msg := strings.TrimSpace(stderr.String())
		if code != 1 || strings.Count(msg, "\n") != 0 || !strings.Contains(msg, c.want) {
			t.Errorf("%q: exit %d, stderr %q: want exit 1 and one line containing %q", c.args, code, msg, c.want)
		}
	}
}

// lora_alpha 1e300 passed: lora2gguf wrote alpha inf and export --merge non-finite weights,
// both exiting 0.
func TestAdapterAlphaBeyondFloat32(t *testing.T) {
	_, adapter := trainedPEFT(t)
	cfg := filepath.Join(adapter, peft.ConfigFile)
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	huge := regexp.MustCompile(`"lora_alpha": *[0-9.e+]+`).ReplaceAll(b, []byte(`"lora_alpha": 1e300`))
	if bytes.Equal(huge, b) {
		t.Fatal("adapter_config.json has no lora_alpha to change")
	}
	if err := os.WriteFile(cfg, huge, 0o644); err != nil {
		t.Fatal(err)
	}
	gguf := filepath.Join(filepath.Dir(adapter), "model.gguf")
	for _, args := range [][]string{
		{"convert", "lora2gguf", adapter, filepath.Join(t.TempDir(), "a.gguf"), "--base", gguf},
		{"export", "--merge", adapter, filepath.Join(t.TempDir(), "merged")},
	} {
		var stderr bytes.Buffer
		code := runWithApp(args, &stderr)
		msg := strings.TrimSpace(stderr.String())
		if want := "adapter_config.json: lora_alpha 1e+300 is outside float32's range"; code != 1 || strings.Count(msg, "\n") != 0 || !strings.Contains(msg, want) {
			t.Errorf("%q: exit %d, stderr %q: want exit 1 and one line containing %q", args, code, msg, want)
		}
	}
}
