// Package data loads math problem sets (GSM8K, MATH, MATH500, AMC23, AIME24/25, verl and
// Hugging Face parquet exports) into one Problem type, and generates a synthetic set that
// needs no download.
package data

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Problem is one question with its gold answer, whatever file it came from.
type Problem struct {
	// ID is unique within its source file: the source's own id (unique_id, id, idx,
	// extra_info.index) when it has one, the path under the loaded folder for per-problem
	// JSON files, and the 0-based row number otherwise.
	ID string
	// Dataset names the problem set: the format name, or for verl rows their
	// extra_info.subset (else data_source).
	Dataset string
	// Question is the bare problem text. verl prompts carry the instruction suffix the
	// authors appended (see Instructions); it is removed here so the debate engine adds it
	// exactly once.
	Question string
	// Gold is the reference answer as text: GSM8K's "#### N" with commas removed, the last
	// \boxed{} of a MATH solution, integral floats written as integers ("27" for 27.0).
	// Other strings are kept as given, AIME's "025" included; the robust grader handles it.
	Gold string
	// Subject is the source's subject or type ("Algebra"), empty when unknown.
	Subject string
	// Level is the MATH difficulty 1-5, 0 when unknown (including MATH's "Level ?").
	Level int
	// Solution is the worked solution when the source has one.
	Solution string
}

// Options selects and subsamples what Load returns. The zero value loads everything in file
// order with the format detected.
type Options struct {
	// Format is one of Formats(), applied to every file loaded; empty detects it per file
	// from the first row's fields (and, for AMC/AIME, the file's path).
	Format string
	// Limit keeps at most this many problems after filtering and sampling; 0 keeps all.
	Limit int
	// SampleRatio in (0, 1) keeps int(n*ratio) problems, shuffled with Seed (the reference
	// shuffles too, without a seed); 0 or 1 keeps all in file order.
	SampleRatio float64
	// Seed makes the SampleRatio subset and its order reproducible.
	Seed uint64
	// Subjects keeps problems of these subjects, compared without case, spaces, "&"/"and"
	// or underscores ("counting_and_probability" matches "Counting & Probability").
	Subjects []string
	// Levels keeps problems of these levels.
	Levels []int
	// SkipMalformed skips rows that cannot be read (bad JSON, no question, no gold) with a
	// warning naming file and line, instead of failing the load.
	SkipMalformed bool
}

// Formats lists the accepted values of Options.Format.
func Formats() []string {
	names := make([]string, len(layouts))
	for i, l := range layouts {
		names[i] = l.name
	}
	return names
}

// Load reads problems from a file (.jsonl, .json, .parquet) or a folder, which is walked for
// such files (a MATH per-problem tree like math/train/<subject>/<n>.json among them; other
// files are ignored), then filters and subsamples them as opt says.
func Load(path string, opt Options) ([]Problem, error) {
	if err := opt.validate(); err != nil {
		return nil, err
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	var problems []Problem
	if info.IsDir() {
		problems, err = loadDir(path, opt)
	} else {
		problems, err = loadFile(path, filepath.Base(path), opt)
	}
	if err != nil {
		return nil, err
	}
	if len(problems) == 0 {
		return nil, fmt.Errorf("load %s: no usable problems", path)
	}
	if problems, err = opt.selectFrom(problems); err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	return problems, nil
}

func (opt Options) validate() error {
	if opt.Format != "" && findLayout(opt.Format) == nil {
		return fmt.Errorf("unknown format %q (known: %s)", opt.Format, strings.Join(Formats(), ", "))
	}
	if opt.Limit < 0 {
		return fmt.Errorf("limit %d is negative", opt.Limit)
	}
	if opt.SampleRatio < 0 || opt.SampleRatio > 1 {
		return fmt.Errorf("sample ratio %g is outside [0, 1]", opt.SampleRatio)
	}
	return nil
}

// loadDir loads every data file under root in natural path order (2.json before 10.json).
func loadDir(root string, opt Options) ([]Problem, error) {
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), ".") && p != root {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.IsDir() && isDataFile(p) {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("walk %s: %w", root, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("load %s: no .jsonl, .json or .parquet files in the folder", root)
	}
	slices.SortFunc(files, naturalCompare)
	// IDs of per-problem files keep the folder name: train/algebra/1.json.
	parent := filepath.Dir(filepath.Clean(root))
	var problems []Problem
	for _, f := range files {
		rel, err := filepath.Rel(parent, f)
		if err != nil {
			return nil, fmt.Errorf("load %s: %w", f, err)
		}
		ps, err := loadFile(f, filepath.ToSlash(rel), opt)
		if err != nil {
			return nil, err
		}
		problems = append(problems, ps...)
	}
	return problems, nil
}

func isDataFile(p string) bool {
	switch strings.ToLower(filepath.Ext(p)) {
	case ".jsonl", ".json", ".parquet":
		return true
	}
	return false
}

// loadFile reads one file; name is the ID given to a single-problem JSON file.
func loadFile(path, name string, opt Options) ([]Problem, error) {
	var (
		rows []row
		err  error
	)
	switch strings.ToLower(filepath.Ext(path)) {
	case ".jsonl":
		rows, err = readJSONL(path, opt.SkipMalformed)
	case ".json":
		rows, err = readJSON(path, name, opt.SkipMalformed)
	case ".parquet":
		rows, err = readParquet(path)
	default:
		return nil, fmt.Errorf("load %s: unsupported file type (want .jsonl, .json or .parquet)", path)
	}
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("load %s: no rows", path)
	}
	l, err := chooseLayout(path, rows[0].rec, opt.Format)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	problems := make([]Problem, 0, len(rows))
	for i, r := range rows {
		p, err := l.convert(r.rec, l.name)
		if err != nil {
			err = fmt.Errorf("%s %s: %w", path, r.where, err)
			if !opt.SkipMalformed && !errors.Is(err, errEmptyGold) {
				return nil, err
			}
			warnSkipped(err)
			continue
		}
		if p.ID == "" {
			p.ID = cmp.Or(r.id, strconv.Itoa(i))
		}
		problems = append(problems, p)
	}
	return problems, nil
}

// selectFrom applies the filters, then the seeded ratio sample, then the limit. A ratio
// that keeps none of the problems is an error: it names the ratio, not an empty file.
func (opt Options) selectFrom(problems []Problem) ([]Problem, error) {
	if len(opt.Subjects) > 0 || len(opt.Levels) > 0 {
		wanted := make(map[string]bool, len(opt.Subjects))
		for _, s := range opt.Subjects {
			wanted[subjectKey(s)] = true
		}
		problems = slices.DeleteFunc(problems, func(p Problem) bool {
			return (len(wanted) > 0 && !wanted[subjectKey(p.Subject)]) ||
				(len(opt.Levels) > 0 && !slices.Contains(opt.Levels, p.Level))
		})
	}
	if opt.SampleRatio > 0 && opt.SampleRatio < 1 {
		n := len(problems)
		keep := int(float64(n) * opt.SampleRatio)
		if keep == 0 && n > 0 {
			return nil, fmt.Errorf("sample ratio %g chooses none of the %d problems (a ratio above 1/%d chooses some)", opt.SampleRatio, n, n)
		}
		shuffle(problems, opt.Seed)
		problems = problems[:keep]
	}
	if opt.Limit > 0 && opt.Limit < len(problems) {
		problems = problems[:opt.Limit]
	}
	return problems, nil
}

// subjectKey folds the spellings of one subject together: "Counting & Probability",
// "counting_and_probability".
func subjectKey(s string) string {
	s = strings.ToLower(strings.ReplaceAll(s, "&", "and"))
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == '_' || r == '-' {
			return -1
		}
		return r
	}, s)
}
