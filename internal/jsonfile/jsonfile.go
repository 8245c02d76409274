// Package jsonfile reads and writes the JSON files of model directories (config.json,
// tokenizer.json, adapter_config.json, safetensors indexes): read whole under a size limit,
// since the files are untrusted, and written atomically as indented JSON.
package jsonfile

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/umad-dev/umad/internal/atomicfile"
)

// Read returns the file's bytes, or an error if it holds more than limit.
func Read(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(raw)) > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	return raw, nil
}

// Write writes v as indented JSON atomically. HTML escaping is off so that tokens such
// as <|im_end|> stay readable.
func Write(path string, v any) error {
	return atomicfile.Write(path, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	})
}
