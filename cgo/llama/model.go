package llama

/*
#include <stdlib.h>
#include "llama.h"
int umad_tokenize(const struct llama_vocab *vocab, const char *text, int32_t text_len, llama_token *tokens,
                  int32_t n_tokens_max, bool add_special, bool parse_special, size_t stack_size, int32_t *result);
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unicode/utf8"
	"unsafe"
)

// ModelParams configures loading a GGUF file.
type ModelParams struct {
	// GPULayers is the number of layers to offload to a GPU backend (0 = CPU only).
	GPULayers int
	// Devices names the GPUs the offloaded layers are split over, as ggml names them
	// ("CUDA0", "CUDA1"; see Devices); empty means all of them.
	Devices []string
	// VocabOnly loads the tokenizer without the weights.
	VocabOnly bool
	// NoMmap reads the weights into memory instead of mapping the file.
	NoMmap bool
}

// Model is a loaded GGUF model: weights and tokenizer.
type Model struct {
	mu        sync.Mutex
	m         *C.struct_llama_model
	vocab     *C.struct_llama_vocab
	path      string
	contexts  map[*Context]bool // open contexts; the model outlives them
	gpuLayers int
	mmap      bool // CPU weights are the file's read-only pages
	adapters  []*Adapter
}

// LoadModel loads a GGUF model. Callers that want a precise message for a corrupt or
// unsupported file should validate it with package model first; llama.cpp itself only
// reports "failed to load" with its last log line.
func LoadModel(path string, p ModelParams) (*Model, error) {
	Init()
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("load model: %w", err)
	}
	mp := C.llama_model_default_params()
	mp.n_gpu_layers = C.int32_t(p.GPULayers)
	mp.vocab_only = C.bool(p.VocabOnly)
	mp.use_mmap = C.bool(!p.NoMmap)
	if len(p.Devices) > 0 {
		devs, err := gpuDevices(p.Devices)
		if err != nil {
			return nil, fmt.Errorf("load model %s: %w", path, err)
		}
		defer C.free(unsafe.Pointer(devs))
		mp.devices = devs
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	takeLastError()
	m := C.llama_model_load_from_file(cpath, mp)
	if m == nil {
		if why := takeLastError(); why != "" {
			return nil, fmt.Errorf("load model %s: llama.cpp: %s", path, why)
		}
		return nil, fmt.Errorf("load model %s: llama.cpp could not load it", path)
	}
	return &Model{m: m, vocab: C.llama_model_get_vocab(m), path: path, contexts: map[*Context]bool{},
		gpuLayers: p.GPULayers, mmap: !p.NoMmap}, nil
}

// Close frees the model. It fails while contexts made from it are open.
func (m *Model) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		return ErrClosed
	}
	if len(m.contexts) > 0 {
		return fmt.Errorf("close model %s: %d contexts still open", m.path, len(m.contexts))
	}
	for _, a := range m.adapters {
		a.free()
	}
	C.llama_model_free(m.m)
	m.m, m.vocab, m.adapters = nil, nil, nil
	return nil
}

// lock returns with m.mu held when the model is open.
func (m *Model) lock() error {
	m.mu.Lock()
	if m.m == nil {
		m.mu.Unlock()
		return ErrClosed
	}
	return nil
}

// Path is the file the model was loaded from.
func (m *Model) Path() string { return m.path }

// NVocab is the vocabulary size, which is also the length of a logits row.
func (m *Model) NVocab() int {
	if m.lock() != nil {
		return 0
	}
	defer m.mu.Unlock()
	return int(C.llama_vocab_n_tokens(m.vocab))
}

// NCtxTrain is the context length the model was trained with.
func (m *Model) NCtxTrain() int {
	if m.lock() != nil {
		return 0
	}
	defer m.mu.Unlock()
	return int(C.llama_model_n_ctx_train(m.m))
}

// Meta returns a metadata value as text, e.g. Meta("general.architecture").
func (m *Model) Meta(key string) (string, bool) {
	if m.lock() != nil {
		return "", false
	}
	defer m.mu.Unlock()
	return m.metaLocked(key)
}

func (m *Model) metaLocked(key string) (string, bool) {
	ckey := C.CString(key)
	defer C.free(unsafe.Pointer(ckey))
	buf := make([]byte, 256)
	for {
		n := int(C.llama_model_meta_val_str(m.m, ckey, (*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf))))
		if n < 0 {
			return "", false
		}
		if n < len(buf) {
			return string(buf[:n]), true
		}
		buf = make([]byte, n+1)
	}
}

func (m *Model) architectureLocked() string {
	s, _ := m.metaLocked("general.architecture")
	return s
}

// metaInt is an integer metadata value, or def; m.mu is held.
func metaInt(m *Model, key string, def int64) int64 {
	s, ok := m.metaLocked(key)
	if !ok {
		return def
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return def
	}
	return v
}

// Architecture is general.architecture (qwen2, qwen3, llama, ...).
func (m *Model) Architecture() string {
	s, _ := m.Meta("general.architecture")
	return s
}

// ChatTemplate is the model's tokenizer.chat_template, or "" if it has none.
func (m *Model) ChatTemplate() string {
	if m.lock() != nil {
		return ""
	}
	defer m.mu.Unlock()
	t := C.llama_model_chat_template(m.m, nil)
	if t == nil {
		return ""
	}
	return C.GoString(t)
}

// MaxTokenizeBytes is the longest text Tokenize accepts.
const MaxTokenizeBytes = 2 << 20

// llama.cpp splits text for BPE with std::regex where it has no hand-written splitter
// (Qwen2's pre-tokenizer, among others), and the matcher recurses once per character of a
// match: a run of 30,000 letters overflowed an 8 MiB thread stack. Measured here (gcc -O3)
// at 320 bytes of stack per character for runs of ASCII and Latin letters, CJK, punctuation,
// spaces and newlines, 0 for Llama 3's hand-written splitter. Each call gets a thread whose
// stack has room for 512 bytes per byte of text, so MaxTokenizeBytes needs 1 GiB of address
// space, touched only as deep as the recursion goes.
const (
	tokenizeStackBase    = 8 << 20
	tokenizeStackPerByte = 512
)

// Tokenize converts text to token ids. addSpecial adds BOS/EOS where the model is
// configured to; parseSpecial maps special-token text such as <|im_start|> to its id.
func (m *Model) Tokenize(text string, addSpecial, parseSpecial bool) ([]int32, error) {
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	if len(text) > MaxTokenizeBytes {
		return nil, fmt.Errorf("tokenize: text of %d bytes is longer than the %d bytes umad tokenizes", len(text), MaxTokenizeBytes)
	}
	// llama.cpp throws a C++ exception (an abort through cgo) on invalid UTF-8.
	if !utf8.ValidString(text) {
		return nil, errors.New("tokenize: text is not valid UTF-8")
	}
	ctext := C.CString(text)
	defer C.free(unsafe.Pointer(ctext))
	stack := C.size_t(tokenizeStackBase + tokenizeStackPerByte*len(text))
	n := len(text) + 8
	for {
		out := make([]int32, n)
		var got C.int32_t
		if rc := C.umad_tokenize(m.vocab, ctext, C.int32_t(len(text)), (*C.llama_token)(unsafe.Pointer(&out[0])), C.int32_t(n),
			C.bool(addSpecial), C.bool(parseSpecial), stack, &got); rc != 0 {
			return nil, fmt.Errorf("tokenize: cannot start a thread with a %d MiB stack for %d bytes of text: %w", stack>>20, len(text), syscall.Errno(rc))
		}
		if got >= 0 {
			return out[:got], nil
		}
		if got == -(1<<31) || int(-got) <= n {
			return nil, fmt.Errorf("tokenize: llama.cpp failed on %d bytes of text", len(text))
		}
		n = int(-got)
	}
}

// Detokenize converts token ids back to text. renderSpecial writes special tokens as
// their text (e.g. <|im_end|>); otherwise they are dropped.
func (m *Model) Detokenize(tokens []int32, renderSpecial bool) (string, error) {
	if err := m.lock(); err != nil {
		return "", err
	}
	defer m.mu.Unlock()
	if err := m.checkTokens(tokens); err != nil {
		return "", err
	}
	if len(tokens) == 0 {
		return "", nil
	}
	n := 8*len(tokens) + 16
	for {
		buf := make([]byte, n)
		got := int(C.llama_detokenize(m.vocab, (*C.llama_token)(unsafe.Pointer(&tokens[0])), C.int32_t(len(tokens)),
			(*C.char)(unsafe.Pointer(&buf[0])), C.int32_t(n), C.bool(false), C.bool(renderSpecial)))
		if got >= 0 {
			// Byte-level tokens can end mid-character; like Hugging Face's decode, replace
			// the broken bytes with U+FFFD so the text is valid UTF-8 (and can be tokenized).
			return strings.ToValidUTF8(string(buf[:got]), "\uFFFD"), nil
		}
		if -got <= n {
			return "", fmt.Errorf("detokenize: llama.cpp failed on %d tokens", len(tokens))
		}
		n = -got
	}
}

// TokenText is the vocabulary entry of a token as stored (byte-level encoded for BPE).
func (m *Model) TokenText(tok int32) (string, error) {
	if err := m.lock(); err != nil {
		return "", err
	}
	defer m.mu.Unlock()
	if err := m.checkTokens([]int32{tok}); err != nil {
		return "", err
	}
	return C.GoString(C.llama_vocab_get_text(m.vocab, C.llama_token(tok))), nil
}

func (m *Model) checkTokens(tokens []int32) error {
	nv := int32(C.llama_vocab_n_tokens(m.vocab))
	for i, t := range tokens {
		if t < 0 || t >= nv {
			return fmt.Errorf("token %d at index %d is outside the vocabulary [0, %d)", t, i, nv)
		}
	}
	return nil
}

// IsEOG reports whether a token ends generation (EOS, EOT, <|im_end|>, ...).
func (m *Model) IsEOG(tok int32) bool {
	if m.lock() != nil {
		return false
	}
	defer m.mu.Unlock()
	if tok < 0 || tok >= int32(C.llama_vocab_n_tokens(m.vocab)) {
		return false
	}
	return bool(C.llama_vocab_is_eog(m.vocab, C.llama_token(tok)))
}

// EOGTokens lists every end-of-generation token of the vocabulary.
func (m *Model) EOGTokens() []int32 {
	if m.lock() != nil {
		return nil
	}
	defer m.mu.Unlock()
	nv := int32(C.llama_vocab_n_tokens(m.vocab))
	var out []int32
	for t := int32(0); t < nv; t++ {
		if C.llama_vocab_is_eog(m.vocab, C.llama_token(t)) {
			out = append(out, t)
		}
	}
	return out
}

// SpecialTokens are the ids of the vocabulary's special tokens; -1 where absent.
type SpecialTokens struct {
	BOS, EOS, EOT, PAD int32
	AddBOS             bool
}

// Specials returns the model's special token ids.
func (m *Model) Specials() SpecialTokens {
	if m.lock() != nil {
		return SpecialTokens{-1, -1, -1, -1, false}
	}
	defer m.mu.Unlock()
	return SpecialTokens{
		BOS:    int32(C.llama_vocab_bos(m.vocab)),
		EOS:    int32(C.llama_vocab_eos(m.vocab)),
		EOT:    int32(C.llama_vocab_eot(m.vocab)),
		PAD:    int32(C.llama_vocab_pad(m.vocab)),
		AddBOS: bool(C.llama_vocab_get_add_bos(m.vocab)),
	}
}

// Adapter is a LoRA adapter loaded for a model. It is freed with its model.
type Adapter struct {
	model *Model
	a     *C.struct_llama_adapter_lora
	users int // contexts applying it (guarded by model.mu): freeing it under them would crash
}

// LoadAdapter loads a LoRA adapter in GGUF form for this model.
func (m *Model) LoadAdapter(path string) (*Adapter, error) {
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("load adapter: %w", err)
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	takeLastError()
	a := C.llama_adapter_lora_init(m.m, cpath)
	if a == nil {
		return nil, fmt.Errorf("load adapter %s: llama.cpp: %s", path, takeLastError())
	}
	ad := &Adapter{model: m, a: a}
	m.adapters = append(m.adapters, ad)
	return ad, nil
}

// Close frees the adapter. It fails while contexts apply it.
func (a *Adapter) Close() error {
	m := a.model
	if err := m.lock(); err != nil {
		return err
	}
	defer m.mu.Unlock()
	if a.a == nil {
		return ErrClosed
	}
	if a.users > 0 {
		return fmt.Errorf("free adapter: %d contexts still apply it", a.users)
	}
	for i, x := range m.adapters {
		if x == a {
			m.adapters = append(m.adapters[:i], m.adapters[i+1:]...)
			break
		}
	}
	a.free()
	return nil
}

func (a *Adapter) free() {
	if a.a != nil {
		C.llama_adapter_lora_free(a.a)
		a.a = nil
	}
}
