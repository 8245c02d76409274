package data

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// ReadLines calls fn with each non-blank line of r and its 1-based line number; lines may be
// of any length. It stops at the first error from fn or from reading.
func ReadLines(r io.Reader, fn func(lineNo int, line []byte) error) error {
	br := bufio.NewReaderSize(r, 1<<20)
	for lineNo := 1; ; lineNo++ {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			if ferr := fn(lineNo, line); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("line %d: %w", lineNo, err)
		}
	}
}

// decodeObject decodes one JSON object (a JSONL line) with numbers kept as json.Number, and
// fails on anything else: arrays, scalars, null, trailing data.
func decodeObject(line []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return nil, fmt.Errorf("invalid JSON object: %w", err)
	}
	if obj == nil {
		return nil, errors.New("invalid JSON object: null")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("invalid JSON object: data after the object")
	}
	return obj, nil
}

func readJSONL(path string, skipMalformed bool) ([]row, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	defer f.Close()
	return readJSONLFrom(f, path, skipMalformed)
}

func readJSONLFrom(r io.Reader, path string, skipMalformed bool) ([]row, error) {
	var rows []row
	err := ReadLines(r, func(lineNo int, line []byte) error {
		obj, err := decodeObject(line)
		if err != nil {
			err = fmt.Errorf("%s line %d: %w", path, lineNo, err)
			if !skipMalformed {
				return err
			}
			warnSkipped(err)
			return nil
		}
		rows = append(rows, row{rec: obj, where: fmt.Sprintf("line %d", lineNo)})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	return rows, nil
}

// readJSON reads a .json file: one object (a MATH per-problem file, whose ID is name), an
// array of objects, or JSON lines under a .json name as some exporters write them.
func readJSON(path, name string, skipMalformed bool) ([]row, error) {
	content, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	trimmed := bytes.TrimSpace(content)
	if bytes.HasPrefix(trimmed, []byte("[")) {
		var objs []map[string]any
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		dec.UseNumber()
		if err := dec.Decode(&objs); err != nil {
			return nil, fmt.Errorf("load %s: %w", path, err)
		}
		rows := make([]row, 0, len(objs))
		for i, obj := range objs {
			if obj == nil {
				err := fmt.Errorf("%s item %d: not an object", path, i+1)
				if !skipMalformed {
					return nil, err
				}
				warnSkipped(err)
				continue
			}
			rows = append(rows, row{rec: obj, where: fmt.Sprintf("item %d", i+1)})
		}
		return rows, nil
	}
	if obj, err := decodeObject(trimmed); err == nil {
		return []row{{rec: obj, where: "object", id: name}}, nil
	}
	return readJSONLFrom(bytes.NewReader(content), path, skipMalformed)
}
