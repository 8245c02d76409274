package data

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/parquet-go/parquet-go"
)

// readParquet reads every row of a parquet file as a generic record: nested structs become
// maps and lists slices, so verl's prompt list and reward_model struct read like JSON.
func readParquet(path string) (rows []row, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	// The parquet library panics on some malformed schemas (a LIST without its repeated
	// group, for one); a bad file is a user error, not a crash.
	defer func() {
		if p := recover(); p != nil {
			rows, err = nil, fmt.Errorf("load %s: malformed parquet: %v", path, p)
		}
	}()
	file, err := parquet.OpenFile(f, info.Size())
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	reader := parquet.NewReader(file)
	defer reader.Close()
	rows = make([]row, 0, reader.NumRows())
	for i := 1; ; i++ {
		rec := record{}
		err := reader.Read(&rec)
		if errors.Is(err, io.EOF) {
			return rows, nil
		}
		if err != nil {
			return nil, fmt.Errorf("load %s row %d: %w", path, i, err)
		}
		rows = append(rows, row{rec: rec, where: fmt.Sprintf("row %d", i)})
	}
}
