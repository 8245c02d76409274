// Package rollouts stores records as zstd-compressed JSONL that survives interruption:
// every Append adds one complete zstd frame holding one JSON line and syncs it, so a
// crash can only lose the frame being written, and Read drops (and Repair removes) such
// a torn tail.
package rollouts

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/klauspost/compress/zstd"

	"github.com/umad-dev/umad/internal/atomicfile"
)

var (
	encoder, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault))
	decoder, _ = zstd.NewReader(nil)
)

// Writer appends records to a file.
type Writer struct{ f *os.File }

// OpenAppend opens path for appending, creating it if needed. Call Repair first on a
// file that an interrupted run may have left.
func OpenAppend(path string) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open rollouts: %w", err)
	}
	return &Writer{f: f}, nil
}

// Append writes one record as one JSON line in its own zstd frame and syncs the file.
func (w *Writer) Append(rec any) error {
	line, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("append to %s: %w", w.f.Name(), err)
	}
	frame := encoder.EncodeAll(append(line, '\n'), nil)
	if _, err := w.f.Write(frame); err != nil {
		return fmt.Errorf("append to %s: %w", w.f.Name(), err)
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("append to %s: %w", w.f.Name(), err)
	}
	return nil
}

// Close closes the file.
func (w *Writer) Close() error { return w.f.Close() }

// WriteFile writes a whole file of records atomically (a temporary file renamed into
// place), in the format Append writes.
func WriteFile[T any](path string, recs []T) error {
	return atomicfile.Write(path, func(w io.Writer) error {
		for _, r := range recs {
			line, err := json.Marshal(r)
			if err != nil {
				return err
			}
			if _, err := w.Write(encoder.EncodeAll(append(line, '\n'), nil)); err != nil {
				return err
			}
		}
		return nil
	})
}

// Read calls fn with every complete record of the file in order, and reports whether
// the file ends in a torn record (which it skips). A missing file has no records.
func Read(path string, fn func(line []byte) error) (torn bool, err error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read rollouts: %w", err)
	}
	defer f.Close()
	dec, err := zstd.NewReader(bufio.NewReaderSize(f, 1<<20), zstd.WithDecoderConcurrency(1))
	if err != nil {
		return false, fmt.Errorf("read %s: %w", path, err)
	}
	defer dec.Close()
	br := bufio.NewReaderSize(dec, 1<<20)
	for n := 1; ; n++ {
		line, rerr := br.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' && json.Valid(line) {
			if err := fn(bytes.TrimSpace(line)); err != nil {
				return false, fmt.Errorf("read %s record %d: %w", path, n, err)
			}
		} else if len(line) > 0 || (rerr != nil && rerr != io.EOF) {
			return true, nil // an interrupted append: everything before it is good
		}
		if rerr == io.EOF {
			return false, nil
		}
		if rerr != nil {
			return true, nil
		}
	}
}

// Repair rewrites a file that ends in a torn record without it (atomically), so later
// appends follow good data. It reports how many good records the file holds.
func Repair(path string) (records int, err error) {
	var lines [][]byte
	torn, err := Read(path, func(l []byte) error {
		lines = append(lines, bytes.Clone(l))
		return nil
	})
	if err != nil || !torn {
		return len(lines), err
	}
	return len(lines), atomicfile.Write(path, func(w io.Writer) error {
		for _, l := range lines {
			if _, err := w.Write(encoder.EncodeAll(append(l, '\n'), nil)); err != nil {
				return err
			}
		}
		return nil
	})
}
