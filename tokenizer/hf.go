package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/umad-dev/umad/internal/jsonfile"
)

// tokenUnused is llama_token_type's UNUSED: the [PADn] entries that fill a vocabulary up to
// the embedding's row count.
const tokenUnused int32 = 5

// hfTokenizerMaxBytes bounds what is read of tokenizer.json (Qwen3's is 11.4 MB).
const hfTokenizerMaxBytes = 256 << 20

// HF is a Hugging Face tokenizer (tokenizer.json plus tokenizer_config.json: byte-level BPE,
// or SentencePiece-style BPE with byte fallback) in the form a GGUF file stores it.
type HF struct {
	voc *vocab // tokens by id (byte-level spelling; added tokens verbatim), types, merges
	fam family // the pre-tokenizer family, with this tokenizer's bos/eos/pad texts

	// Special token ids; -1 when the tokenizer has none.
	BOS, EOS, EOT, PAD int
	// AddBOS is whether encoding prepends BOS (Llama 3 does, Qwen does not).
	AddBOS bool
	// ChatTemplate is the Jinja chat template, "" if none.
	ChatTemplate string
}

// Len is the number of tokens, padding included.
func (t *HF) Len() int { return len(t.voc.tokens) }

// Pre is llama.cpp's name for the pre-tokenizer (tokenizer.ggml.pre).
func (t *HF) Pre() string { return t.fam.Pre }

// Pad fills the vocabulary up to size with unused [PADn] tokens: the rows of an embedding
// that no token names.
func (t *HF) Pad(size int) {
	for id := t.Len(); id < size; id++ {
		t.voc.tokens = append(t.voc.tokens, fmt.Sprintf("[PAD%d]", id))
		t.voc.types = append(t.voc.types, tokenUnused)
	}
}

// specialIDs are the ids the Hugging Face files name.
func (t *HF) specialIDs() specialIDs {
	return specialIDs{bos: t.BOS, eos: t.EOS, pad: t.PAD}
}

type hfTokenizerFile struct {
	AddedTokens []struct {
		ID      int    `json:"id"`
		Content string `json:"content"`
		Special bool   `json:"special"`
	} `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Model         struct {
		Type         string            `json:"type"`
		Vocab        map[string]int    `json:"vocab"`
		Merges       []json.RawMessage `json:"merges"`
		ByteFallback bool              `json:"byte_fallback"`
		UnkToken     *string           `json:"unk_token"`
	} `json:"model"`
}

// hfTokenizerConfigFile is the part of tokenizer_config.json a tokenizer needs. Token fields
// are either a string or an AddedToken object with "content"; chat_template is a string or
// a list of named templates.
type hfTokenizerConfigFile struct {
	AddBOSToken  *bool           `json:"add_bos_token"`
	BOSToken     json.RawMessage `json:"bos_token"`
	EOSToken     json.RawMessage `json:"eos_token"`
	PadToken     json.RawMessage `json:"pad_token"`
	ChatTemplate json.RawMessage `json:"chat_template"`
}

// LoadHF reads dir/tokenizer.json and dir/tokenizer_config.json (and
// dir/chat_template.jinja when the config has no template). Only byte-level BPE tokenizers
// whose pre-tokenizer llama.cpp implements are accepted: Qwen2/2.5/3 ("qwen2") and Llama 3
// ("llama-bpe").
func LoadHF(dir string) (*HF, error) {
	t, err := loadHF(dir)
	if err != nil {
		return nil, fmt.Errorf("load hf tokenizer from %s: %w", dir, err)
	}
	return t, nil
}

func loadHF(dir string) (*HF, error) {
	raw, err := jsonfile.Read(filepath.Join(dir, "tokenizer.json"), hfTokenizerMaxBytes)
	if err != nil {
		return nil, err
	}
	var tj hfTokenizerFile
	if err := json.Unmarshal(raw, &tj); err != nil {
		return nil, fmt.Errorf("parse tokenizer.json: %w", err)
	}
	raw, err = jsonfile.Read(filepath.Join(dir, "tokenizer_config.json"), hfTokenizerMaxBytes)
	if err != nil {
		return nil, err
	}
	var tc hfTokenizerConfigFile
	if err := json.Unmarshal(raw, &tc); err != nil {
		return nil, fmt.Errorf("parse tokenizer_config.json: %w", err)
	}
	if tj.Model.Type != "BPE" {
		return nil, fmt.Errorf("tokenizer model %q is not supported (want BPE)", tj.Model.Type)
	}
	fam, err := preTokenizerFamily(tj.PreTokenizer)
	if tj.Model.ByteFallback {
		fam, err = spmFamily(&tj)
	}
	if err != nil {
		return nil, err
	}
	voc, err := hfVocab(&tj)
	if err != nil {
		return nil, err
	}
	if fam.SPM {
		markByteTokens(voc)
		if id := voc.id(fam.Unk); id >= 0 {
			voc.types[id] = tokenUnknown
		}
	}
	t := &HF{voc: voc, fam: fam, EOT: -1}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		id   *int
		text *string
	}{
		{"bos_token", tc.BOSToken, &t.BOS, &t.fam.BOS},
		{"eos_token", tc.EOSToken, &t.EOS, &t.fam.EOS},
		{"pad_token", tc.PadToken, &t.PAD, &t.fam.PAD},
	} {
		text, err := tokenText(f.raw)
		if err != nil {
			return nil, fmt.Errorf("tokenizer_config.json %s: %w", f.name, err)
		}
		*f.id, *f.text = -1, text
		if text == "" {
			continue
		}
		if *f.id = voc.id(text); *f.id < 0 {
			return nil, fmt.Errorf("tokenizer_config.json %s %q is not in the vocabulary", f.name, text)
		}
	}
	// The family's chat end-of-turn token (its generated models' EOS), on which llama.cpp
	// also stops generating.
	if id := voc.id(fam.EOS); id >= 0 && voc.types[id] == tokenControl {
		t.EOT = id
	}
	if tc.AddBOSToken != nil {
		t.AddBOS = *tc.AddBOSToken
	} else {
		t.AddBOS = postProcessorAddsBOS(tj.PostProcessor, t.fam.BOS)
	}
	t.fam.AddBOS = t.AddBOS
	if t.ChatTemplate, err = chatTemplate(tc.ChatTemplate, dir); err != nil {
		return nil, err
	}
	return t, nil
}

// preTokenizerFamily recognises the pre-tokenizer by its split regex, which is what decides
// how llama.cpp must cut text before BPE.
func preTokenizerFamily(raw json.RawMessage) (family, error) {
	var pre struct {
		Type          string `json:"type"`
		Pretokenizers []struct {
			Type    string `json:"type"`
			Pattern struct {
				Regex string `json:"Regex"`
			} `json:"pattern"`
		} `json:"pretokenizers"`
	}
	if len(raw) == 0 || string(raw) == "null" {
		return family{}, errors.New("tokenizer.json has no pre_tokenizer; only byte-level BPE tokenizers are supported")
	}
	if err := json.Unmarshal(raw, &pre); err != nil {
		return family{}, fmt.Errorf("tokenizer.json pre_tokenizer: %w", err)
	}
	var regex string
	byteLevel := false
	for _, p := range pre.Pretokenizers {
		switch p.Type {
		case "Split":
			regex = p.Pattern.Regex
		case "ByteLevel":
			byteLevel = true
		}
	}
	var names []string
	for _, f := range families() {
		if f.SPM {
			continue
		}
		if byteLevel && regex == f.Split {
			return f, nil
		}
		names = append(names, f.Pre)
	}
	return family{}, fmt.Errorf("unsupported pre-tokenizer (type %q, split regex %q): supported are the byte-level ones llama.cpp calls %s",
		pre.Type, regex, strings.Join(names, ", "))
}

// hfVocab builds the id-ordered vocabulary: model.vocab entries are normal tokens, added
// tokens are control tokens when special (or spelled like one, <|...|>) and user-defined
// otherwise, as llama.cpp's converter types them; ids nobody names become [PADn] unused.
func hfVocab(tj *hfTokenizerFile) (*vocab, error) {
	n := 0
	for text, id := range tj.Model.Vocab {
		if id < 0 {
			return nil, fmt.Errorf("tokenizer.json: token %q has negative id %d", text, id)
		}
		n = max(n, id+1)
	}
	for _, a := range tj.AddedTokens {
		if a.ID < 0 {
			return nil, fmt.Errorf("tokenizer.json: added token %q has negative id %d", a.Content, a.ID)
		}
		n = max(n, a.ID+1)
	}
	if len(tj.Model.Vocab) == 0 {
		// Added (special) tokens alone made a model whose samples are empty text.
		return nil, errors.New("tokenizer.json has an empty vocabulary (model.vocab): the model could produce no text")
	}
	// Ids are dense in real tokenizers; a sparse one bigger than its entries is corrupt.
	if n > 2*(len(tj.Model.Vocab)+len(tj.AddedTokens))+1024 {
		return nil, fmt.Errorf("tokenizer.json: largest id %d is far beyond its %d entries", n-1, len(tj.Model.Vocab)+len(tj.AddedTokens))
	}
	v := &vocab{tokens: make([]string, n), types: make([]int32, n)}
	set := make([]bool, n)
	for text, id := range tj.Model.Vocab {
		if set[id] {
			return nil, fmt.Errorf("tokenizer.json: id %d is given to both %q and %q", id, v.tokens[id], text)
		}
		v.tokens[id], v.types[id], set[id] = text, tokenNormal, true
	}
	for _, a := range tj.AddedTokens {
		if set[a.ID] && v.tokens[a.ID] != a.Content {
			return nil, fmt.Errorf("tokenizer.json: added token %q takes id %d of %q", a.Content, a.ID, v.tokens[a.ID])
		}
		typ := tokenUserDefined
		if a.Special || (strings.HasPrefix(a.Content, "<|") && strings.HasSuffix(a.Content, "|>")) {
			typ = tokenControl
		}
		v.tokens[a.ID], v.types[a.ID], set[a.ID] = a.Content, typ, true
	}
	for id := range v.tokens {
		if !set[id] {
			v.tokens[id], v.types[id] = fmt.Sprintf("[PAD%d]", id), tokenUnused
		}
	}
	v.merges = make([]string, len(tj.Model.Merges))
	for i, m := range tj.Model.Merges {
		merge, err := mergeString(m)
		if err != nil {
			return nil, fmt.Errorf("tokenizer.json merge %d: %w", i, err)
		}
		v.merges[i] = merge
	}
	return v, nil
}

// mergeString accepts both spellings of a merge: "a b" (tokenizers < 0.20) and ["a", "b"].
func mergeString(raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		if left, right, ok := strings.Cut(s, " "); !ok || left == "" || right == "" {
			return "", fmt.Errorf("%q is not two tokens separated by a space", s)
		}
		return s, nil
	}
	var pair []string
	if err := json.Unmarshal(raw, &pair); err != nil || len(pair) != 2 {
		return "", fmt.Errorf("%s is neither \"a b\" nor [\"a\", \"b\"]", raw)
	}
	if pair[0] == "" || pair[1] == "" || strings.Contains(pair[0], " ") || strings.Contains(pair[1], " ") {
		// GGUF stores merges as one space-separated string, which cannot hold these.
		return "", fmt.Errorf("merge %q cannot be stored in GGUF", pair)
	}
	return pair[0] + " " + pair[1], nil
}

// tokenText reads a tokenizer_config token field: null, a string, or {"content": ...}.
func tokenText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var obj struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return "", fmt.Errorf("want a string or an object with content, got %s", raw)
	}
	return obj.Content, nil
}

// postProcessorAddsBOS reports whether the post-processor's single-sequence template starts
// with the BOS token, which is how Llama 3's tokenizer.json says it adds BOS.
func postProcessorAddsBOS(raw json.RawMessage, bos string) bool {
	if bos == "" || len(raw) == 0 {
		return false
	}
	type step struct {
		Type       string            `json:"type"`
		Processors []json.RawMessage `json:"processors"`
		Single     []struct {
			SpecialToken *struct {
				ID string `json:"id"`
			} `json:"SpecialToken"`
		} `json:"single"`
	}
	var p step
	if json.Unmarshal(raw, &p) != nil {
		return false
	}
	switch p.Type {
	case "TemplateProcessing":
		return len(p.Single) > 0 && p.Single[0].SpecialToken != nil && p.Single[0].SpecialToken.ID == bos
	case "Sequence":
		for _, sub := range p.Processors {
			if postProcessorAddsBOS(sub, bos) {
				return true
			}
		}
	}
	return false
}

// chatTemplate reads tokenizer_config's chat_template (a string, or a list of named
// templates of which "default" is the chat one), else dir/chat_template.jinja.
func chatTemplate(raw json.RawMessage, dir string) (string, error) {
	if len(raw) > 0 && string(raw) != "null" {
		var s string
		if err := json.Unmarshal(raw, &s); err == nil {
			return s, nil
		}
		var named []struct {
			Name     string `json:"name"`
			Template string `json:"template"`
		}
		if err := json.Unmarshal(raw, &named); err != nil {
			return "", fmt.Errorf("tokenizer_config.json chat_template: want a string or a list of {name, template}: %w", err)
		}
		for _, n := range named {
			if n.Name == "default" {
				return n.Template, nil
			}
		}
		return "", errors.New("tokenizer_config.json chat_template lists no \"default\" template")
	}
	b, err := os.ReadFile(filepath.Join(dir, "chat_template.jinja"))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return string(b), nil
}
