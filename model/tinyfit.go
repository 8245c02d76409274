package model

// What a tiny model needs of the machine, checked before anything is allocated.

import (
	"fmt"
	"math"
	"syscall"

	"github.com/umad-dev/umad/internal/sysmem"
	"github.com/umad-dev/umad/safetensors"
)

// tinyVocabSize is the size of the vocabulary WriteTiny writes, known before it is built:
// the tokenizer's, the padded size, or 0 for the tiny tokenizer's few hundred tokens.
func tinyVocabSize(s Shape, opt TinyOptions) int {
	switch {
	case opt.Tokenizer != nil:
		return opt.Tokenizer.Len()
	case opt.VocabSize > 0:
		return opt.VocabSize
	}
	return s.Vocab
}

// What writing a vocabulary costs per token, measured at 1M-2M tokens: about 270 bytes of
// memory (its strings, maps and tokenizer.json's encoding) and 55 of disk (its text in the
// GGUF and in tokenizer.json).
const (
	tinyTokenMemory = 300
	tinyTokenDisk   = 64
)

// tinyFitsMachine is tinyFits with the memory available and the disk free under dir; either
// check is skipped where it cannot be read.
func tinyFitsMachine(dir string, s Shape, vocab int) error {
	mem, ok := sysmem.Available()
	if !ok {
		mem = math.MaxInt64
	}
	// Go's heap may take twice what it holds before it collects: under an address-space
	// limit, half of what the limit leaves is what may be filled.
	if left, ok := sysmem.AddressSpaceLeft(); ok {
		mem = min(mem, left/2)
	}
	disk := int64(math.MaxInt64)
	var fs syscall.Statfs_t
	if syscall.Statfs(dir, &fs) == nil {
		disk = int64(fs.Bavail) * fs.Bsize
	}
	return tinyFits(s, vocab, mem, disk)
}

// tinyFits refuses, before anything is allocated, a model of shape s with a vocabulary of
// vocab tokens that needs more than mem bytes of memory or disk bytes of disk: an absurd
// --vocab or preset was killed half-way instead.
func tinyFits(s Shape, vocab int, mem, disk int64) error {
	s.Vocab = vocab
	needDisk := int64(vocab) * tinyTokenDisk
	for _, t := range s.Tensors() {
		n, err := safetensors.TensorBytes(t.Shape, 4)
		if err != nil {
			return err
		}
		needDisk += 2 * n // in the GGUF and in the safetensors file
	}
	gib := func(n int64) float64 { return float64(n) / (1 << 30) }
	if needMem := int64(vocab) * tinyTokenMemory; needMem > mem {
		return fmt.Errorf("a vocabulary of %d tokens needs about %.2f GiB of memory to write; %.2f GiB is available", vocab, gib(needMem), gib(mem))
	}
	if needDisk > disk {
		return fmt.Errorf("the model takes about %.2f GiB of disk; %.2f GiB is free there", gib(needDisk), gib(disk))
	}
	return nil
}
