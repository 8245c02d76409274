// Package model reads and writes model files: Hugging Face config.json, its conversion to and
// from GGUF (whose file formats are packages gguf and safetensors, and whose tokenizers are
// package tokenizer), and tiny random-weight models that exist identically in both layouts
// so llama.cpp and libtorch can be compared token for token. LoRA adapters are package peft.
//
// Readers treat every file as untrusted: each count, length and offset is checked against the
// file size before anything is allocated, so a lying header yields an error, not a huge
// allocation or a panic.
package model
