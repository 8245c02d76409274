package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/umad-dev/umad/arch"
	"github.com/umad-dev/umad/internal/sharedtest"
)

// The expected figures are those SOURCES.md documents for each release.
func TestLoadHFReal(t *testing.T) {
	cases := []struct {
		dir                 string
		tokens, merges      int
		pre                 string
		bos, eos, eot, pad  int
		addBOS              bool
		templateHas         string
		userDefined, contrl []string
	}{
		{"Qwen2.5-3B-Instruct", 151665, 151387, "qwen2", -1, 151645, 151645, 151643, false,
			"You are Qwen, created by Alibaba Cloud", []string{"<tool_call>"}, []string{"<|im_start|>", "<|fim_prefix|>"}},
		{"Qwen3-4B-Instruct-2507", 151669, 151387, "qwen2", -1, 151645, 151645, 151643, false,
			"<|im_start|>assistant", []string{"<think>", "</think>", "<tool_response>"}, []string{"<|im_end|>"}},
		{"Llama-3.2-3B-Instruct", 128256, 280147, "llama-bpe", 128000, 128009, 128009, -1, true,
			"<|start_header_id|>", nil, []string{"<|eot_id|>", "<|reserved_special_token_247|>"}},
	}
	for _, c := range cases {
		t.Run(c.dir, func(t *testing.T) {
			tok, err := LoadHF(sharedtest.Path(t, "tokenizers/"+c.dir))
			if err != nil {
				t.Fatal(err)
			}
			if tok.Len() != c.tokens || len(tok.voc.merges) != c.merges || tok.Pre() != c.pre {
				t.Errorf("tokens %d merges %d pre %q, want %d %d %q", tok.Len(), len(tok.voc.merges), tok.Pre(), c.tokens, c.merges, c.pre)
			}
			if tok.BOS != c.bos || tok.EOS != c.eos || tok.EOT != c.eot || tok.PAD != c.pad || tok.AddBOS != c.addBOS {
				t.Errorf("bos %d eos %d eot %d pad %d addBOS %v, want %d %d %d %d %v",
					tok.BOS, tok.EOS, tok.EOT, tok.PAD, tok.AddBOS, c.bos, c.eos, c.eot, c.pad, c.addBOS)
			}
			if !strings.Contains(tok.ChatTemplate, c.templateHas) {
				t.Errorf("chat template lacks %q", c.templateHas)
			}
			for _, s := range c.userDefined {
				if id := tok.voc.id(s); id < 0 || tok.voc.types[id] != tokenUserDefined {
					t.Errorf("%q: id %d, want a user-defined token (matched in plain text, as HF does)", s, id)
				}
			}
			for _, s := range c.contrl {
				if id := tok.voc.id(s); id < 0 || tok.voc.types[id] != tokenControl {
					t.Errorf("%q: id %d, want a control token", s, id)
				}
			}
			// Byte-level tokens: "Ġ" stands for a space; the first merge of every file is "Ġ Ġ".
			if tok.voc.merges[0] != "Ġ Ġ" {
				t.Errorf("first merge %q, want \"Ġ Ġ\"", tok.voc.merges[0])
			}
		})
	}
}

// Qwen3's tokenizer.json writes merges as pairs, Qwen2.5's as strings; both mean the same.
func TestMergeSpellingsAgree(t *testing.T) {
	q25, err := LoadHF(sharedtest.Path(t, "tokenizers/Qwen2.5-3B-Instruct"))
	if err != nil {
		t.Fatal(err)
	}
	q3, err := LoadHF(sharedtest.Path(t, "tokenizers/Qwen3-4B-Instruct-2507"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(q25.voc.merges, q3.voc.merges) {
		t.Fatal("Qwen2.5 (string merges) and Qwen3 (pair merges) should read as the same merge list")
	}
}

func writeTokenizerDir(t *testing.T, tokenizerJSON, configJSON string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{"tokenizer.json": tokenizerJSON, "tokenizer_config.json": configJSON} {
		if body == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// okPre is Qwen's pre-tokenizer as tokenizer.json spells it.
var okPre = func() string {
	d, _ := arch.Lookup("qwen2")
	re, _ := json.Marshal(d.Tokenizer.Split)
	return `{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":` + string(re) + `}},{"type":"ByteLevel"}]}`
}()

const okModel = `"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":[["a","b"]]}`

func TestLoadHFSmall(t *testing.T) {
	dir := writeTokenizerDir(t,
		`{"added_tokens":[{"id":3,"content":"<|im_end|>","special":true},{"id":5,"content":"<tool>","special":false}],"pre_tokenizer":`+okPre+`,`+okModel+`}`,
		`{"eos_token":{"content":"<|im_end|>"},"chat_template":[{"name":"tool_use","template":"T"},{"name":"default","template":"D"}]}`)
	tok, err := LoadHF(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a", "b", "ab", "<|im_end|>", "[PAD4]", "<tool>"}
	wantTypes := []int32{tokenNormal, tokenNormal, tokenNormal, tokenControl, tokenUnused, tokenUserDefined}
	if !slices.Equal(tok.voc.tokens, want) || !slices.Equal(tok.voc.types, wantTypes) {
		t.Errorf("tokens %q types %v, want %q %v (id 4 is a hole filled as unused)", tok.voc.tokens, tok.voc.types, want, wantTypes)
	}
	if tok.EOS != 3 || tok.EOT != 3 || tok.BOS != -1 || tok.ChatTemplate != "D" || tok.voc.merges[0] != "a b" {
		t.Errorf("eos %d eot %d bos %d template %q merge %q", tok.EOS, tok.EOT, tok.BOS, tok.ChatTemplate, tok.voc.merges[0])
	}
}

func TestLoadHFErrors(t *testing.T) {
	cases := []struct {
		why, tokenizer, config, want string
	}{
		{"no tokenizer.json", "", `{}`, "tokenizer.json"},
		{"no tokenizer_config.json", `{"pre_tokenizer":` + okPre + `,` + okModel + `}`, "", "tokenizer_config.json"},
		{"unigram model", `{"pre_tokenizer":` + okPre + `,"model":{"type":"Unigram"}}`, `{}`, `"Unigram" is not supported`},
		{"unknown split regex", `{"pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"\\w+"}},{"type":"ByteLevel"}]},` + okModel + `}`, `{}`, "qwen2, llama-bpe"},
		{"no pre-tokenizer", `{"pre_tokenizer":null,` + okModel + `}`, `{}`, "no pre_tokenizer"},
		{"eos not in vocab", `{"pre_tokenizer":` + okPre + `,` + okModel + `}`, `{"eos_token":"</s>"}`, `"</s>" is not in the vocabulary`},
		{"bad merge", `{"pre_tokenizer":` + okPre + `,"model":{"type":"BPE","vocab":{"a":0},"merges":["ab"]}}`, `{}`, "merge 0"},
		{"duplicate id", `{"pre_tokenizer":` + okPre + `,"model":{"type":"BPE","vocab":{"a":0,"b":0},"merges":[]}}`, `{}`, "id 0 is given to both"},
		{"huge sparse id", `{"pre_tokenizer":` + okPre + `,"model":{"type":"BPE","vocab":{"a":900000000},"merges":[]}}`, `{}`, "far beyond"},
		{"only added tokens", `{"added_tokens":[{"id":0,"content":"<|im_end|>","special":true}],"pre_tokenizer":` + okPre + `,"model":{"type":"BPE","vocab":{},"merges":[]}}`, `{}`, "empty vocabulary (model.vocab)"},
		{"corrupt json", `{"model":`, `{}`, "parse tokenizer.json"},
		{"sentencepiece with a space prefix", `{"normalizer":{"type":"Sequence","normalizers":[{"type":"Prepend","prepend":"▁"},` +
			`{"type":"Replace","pattern":{"String":" "},"content":"▁"}]},"pre_tokenizer":null,"model":{"type":"BPE","byte_fallback":true,"vocab":{"a":0},"merges":[]}}`,
			`{}`, "prepends a space"},
	}
	for _, c := range cases {
		t.Run(c.why, func(t *testing.T) {
			_, err := LoadHF(writeTokenizerDir(t, c.tokenizer, c.config))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}
