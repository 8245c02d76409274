// Package tokenizer holds the tokenizers of Hugging Face checkpoints in the form llama.cpp
// reads them: tokenizer.json and tokenizer_config.json read (LoadHF) and written (WriteHF),
// llama.cpp's tokenizer.* GGUF keys written and read back (GGUFKeys, FromGGUF), and small
// ones learned from a text (Train). Two kinds are supported: byte-level BPE (bpe.go) and
// SentencePiece-style BPE with byte fallback (spm.go), each of a family of the architecture
// registry (family.go).
//
// Tokenizer files are untrusted: every id and count is checked before it is used, so a
// lying file yields an error, not a huge allocation or a panic.
package tokenizer
