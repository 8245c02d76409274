package model

import (
	"path/filepath"

	"github.com/umad-dev/umad/gguf"
)

// WriteVocabGGUF writes a GGUF of the Hugging Face checkpoint in dir with its metadata and
// tokenizer but no tensors: what llama.cpp's vocab-only load reads, so that its tokenizer
// can count a prompt before any weight is converted or loaded.
func WriteVocabGGUF(dir, out string) error {
	cfg, err := LoadHFConfig(dir)
	if err != nil {
		return err
	}
	s, tok, err := shapeAndTokenizer(dir, cfg)
	if err != nil {
		return err
	}
	kvs, err := ggufMetadata(s, tok, gguf.TypeF32, filepath.Base(filepath.Clean(dir)))
	if err != nil {
		return err
	}
	w, err := gguf.CreateGGUF(out)
	if err != nil {
		return err
	}
	if err := addKVs(w, kvs); err != nil {
		return err
	}
	return w.Close()
}
