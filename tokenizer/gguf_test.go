package tokenizer

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/umad-dev/umad/arch"
	"github.com/umad-dev/umad/gguf"
)

// Every family's tokenizer reads back from its GGUF keys as the same keys: vocabulary,
// merges or scores, special ids, BOS policy and chat template.
func TestGGUFKeysRoundTrip(t *testing.T) {
	for _, fam := range arch.Tokenizers() {
		t.Run(fam.Name, func(t *testing.T) {
			tok, err := Train("the answer is 42, and the answer is right.", 20, fam, 600)
			if err != nil {
				t.Fatal(err)
			}
			tok.ChatTemplate = "{{ messages }}"
			path := filepath.Join(t.TempDir(), "vocab.gguf")
			w, err := gguf.CreateGGUF(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, kv := range tok.GGUFKeys() {
				if err := w.AddKV(kv.Key, kv.Value); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			g, err := gguf.OpenGGUF(path)
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			back, err := FromGGUF(g)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := back.GGUFKeys(), tok.GGUFKeys(); !reflect.DeepEqual(got, want) {
				t.Errorf("keys read back differ:\n got %.300v\nwant %.300v", got, want)
			}
		})
	}
}
