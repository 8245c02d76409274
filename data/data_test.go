package data

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/umad-dev/umad/internal/sharedtest"
)

func sharedData(t testing.TB) string { return sharedtest.Path(t, "data") }

var integerText = regexp.MustCompile(`^-?[0-9]+$`)

// TestLoadSharedData loads every benchmark file with detection and checks the counts of
// SOURCES.md, the detected dataset and what each format promises about its golds.
func TestLoadSharedData(t *testing.T) {
	root := sharedData(t)
	tests := []struct {
		path    string
		dataset string
		count   int
		check   func(t *testing.T, ps []Problem)
	}{
		{"gsm8k/test.jsonl", "gsm8k", 1319, checkGSM8K},
		{"gsm8k/train.jsonl", "gsm8k", 7473, checkGSM8K},
		{"math500/test.jsonl", "math500", 500, checkMath500},
		{"amc23/test.jsonl", "amc23", 40, checkAMC},
		{"aime24/test.jsonl", "aime24", 30, checkAIME24},
		{"aime25/aime25.jsonl", "aime25", 30, checkIntegers},
		{"aime25/test.jsonl", "aime25", 30, checkIntegers},
		{"math/test.jsonl", "math", 5000, checkLevels},
		// 7500 files, less the two whose solutions end in an empty \boxed{}.
		{"math/train", "math", 7498, checkMathTrain},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			ps, err := Load(filepath.Join(root, tt.path), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(ps) != tt.count {
				t.Fatalf("loaded %d problems, SOURCES.md counts %d", len(ps), tt.count)
			}
			ids := map[string]bool{}
			for _, p := range ps {
				if p.Dataset != tt.dataset {
					t.Fatalf("problem %s: dataset %q, want %q", p.ID, p.Dataset, tt.dataset)
				}
				if strings.TrimSpace(p.Question) == "" || strings.TrimSpace(p.Gold) == "" {
					t.Fatalf("problem %s: empty question or gold: %+v", p.ID, p)
				}
				if ids[p.ID] {
					t.Fatalf("duplicate ID %q", p.ID)
				}
				ids[p.ID] = true
			}
			tt.check(t, ps)
		})
	}
}

// GSM8K golds are the "#### N" numbers, thousands commas removed, so all are integers.
func checkGSM8K(t *testing.T, ps []Problem) {
	checkIntegers(t, ps)
	for _, p := range ps {
		if !strings.Contains(p.Solution, "#### ") {
			t.Fatalf("problem %s: solution lacks the worked answer", p.ID)
		}
	}
}

func checkIntegers(t *testing.T, ps []Problem) {
	t.Helper()
	for _, p := range ps {
		if !integerText.MatchString(p.Gold) {
			t.Fatalf("problem %s: gold %q is not an integer", p.ID, p.Gold)
		}
	}
}

// MATH500's answer column equals the boxed answer of its solution (SOURCES.md), which
// cross-checks the boxed extraction used for MATH; its levels and subjects are all set.
func checkMath500(t *testing.T, ps []Problem) {
	for _, p := range ps {
		boxed, err := boxedAnswer(p.Solution)
		if err != nil || boxed != p.Gold {
			t.Fatalf("problem %s: boxed answer %q (%v), answer column %q", p.ID, boxed, err, p.Gold)
		}
		if p.Level < 1 || p.Level > 5 || p.Subject == "" || !strings.HasPrefix(p.ID, "test/") {
			t.Fatalf("problem %s: level %d, subject %q", p.ID, p.Level, p.Subject)
		}
	}
}

// AMC golds are JSON floats (27.0, -1.0) and must read as integers.
func checkAMC(t *testing.T, ps []Problem) {
	checkIntegers(t, ps)
	golds := goldsOf(ps)
	for _, want := range []string{"27", "-1"} {
		if !slices.Contains(golds, want) {
			t.Errorf("no gold %q among %v", want, golds)
		}
	}
}

// AIME24 keeps the source's strings, leading zeros included ("025").
func checkAIME24(t *testing.T, ps []Problem) {
	checkIntegers(t, ps)
	zeros := 0
	for _, p := range ps {
		if strings.HasPrefix(p.Gold, "0") {
			zeros++
		}
	}
	if zeros != 7 {
		t.Errorf("%d golds with leading zeros, SOURCES.md lists 7", zeros)
	}
}

func checkLevels(t *testing.T, ps []Problem) {
	for _, p := range ps {
		if p.Level < 1 || p.Level > 5 || p.Subject == "" || p.Solution == "" {
			t.Fatalf("problem %s: level %d, subject %q", p.ID, p.Level, p.Subject)
		}
	}
}

// The MATH training tree: one problem per file, the path as ID, subjects as SOURCES.md
// counts them, and its two "Level ?" problems at level 0. The files left out must be
// exactly those with an empty \boxed{}.
func checkMathTrain(t *testing.T, ps []Problem) {
	root := filepath.Join(sharedData(t), "math", "train")
	files, err := filepath.Glob(filepath.Join(root, "*", "*.json"))
	if err != nil || len(files) != 7500 {
		t.Fatalf("%d files under %s (%v), SOURCES.md counts 7500", len(files), root, err)
	}
	loaded := map[string]bool{}
	for _, id := range idsOf(ps) {
		loaded[id] = true
	}
	for _, f := range files {
		rel, _ := filepath.Rel(filepath.Dir(root), f)
		if loaded[filepath.ToSlash(rel)] {
			continue
		}
		content, err := os.ReadFile(f)
		if err != nil || !strings.Contains(string(content), `\\boxed{}`) {
			t.Errorf("%s left out, but its solution has no empty box (%v)", rel, err)
		}
	}
	perSubject := map[string]int{}
	unknownLevel := 0
	for _, p := range ps {
		parts := strings.Split(p.ID, "/")
		if len(parts) != 3 || parts[0] != "train" || subjectKey(parts[1]) != subjectKey(p.Subject) {
			t.Fatalf("ID %q does not name the file of subject %q", p.ID, p.Subject)
		}
		perSubject[parts[1]]++
		if p.Level == 0 {
			unknownLevel++
		}
	}
	want := map[string]int{"algebra": 1744, "counting_and_probability": 771, "geometry": 870,
		"intermediate_algebra": 1295, "number_theory": 869 - 2, "prealgebra": 1205, "precalculus": 746}
	for s, n := range want {
		if perSubject[s] != n {
			t.Errorf("subject %s: %d problems, want %d", s, perSubject[s], n)
		}
	}
	if unknownLevel != 2 {
		t.Errorf("%d problems of unknown level, want MATH's 2 'Level ?'", unknownLevel)
	}
}

func goldsOf(ps []Problem) []string {
	golds := make([]string, len(ps))
	for i, p := range ps {
		golds[i] = p.Gold
	}
	return golds
}

func idsOf(ps []Problem) []string {
	ids := make([]string, len(ps))
	for i, p := range ps {
		ids[i] = p.ID
	}
	return ids
}

// TestSubjectAndLevelFilters runs the filters on the MATH test set, where subject names are
// spelt "Counting & Probability" and the folder spelling must match them too.
func TestSubjectAndLevelFilters(t *testing.T) {
	path := filepath.Join(sharedData(t), "math", "test.jsonl")
	all, err := Load(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		subjects []string
		levels   []int
	}{
		{"folder spelling of a subject", []string{"counting_and_probability"}, nil},
		{"two subjects, any case", []string{"ALGEBRA", "Number Theory"}, nil},
		{"levels only", nil, []int{1, 5}},
		{"subject and level together", []string{"geometry"}, []int{3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Load(path, Options{Subjects: tt.subjects, Levels: tt.levels})
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, p := range all {
				subjectOK := len(tt.subjects) == 0 || slices.ContainsFunc(tt.subjects, func(s string) bool {
					return strings.EqualFold(strings.ReplaceAll(strings.ReplaceAll(s, "_and_", " & "), "_", " "), p.Subject)
				})
				if subjectOK && (len(tt.levels) == 0 || slices.Contains(tt.levels, p.Level)) {
					want = append(want, p.ID)
				}
			}
			if len(want) == 0 {
				t.Fatal("the filter selects nothing; the case tests nothing")
			}
			if !slices.Equal(idsOf(got), want) {
				t.Errorf("got %d problems, want %d", len(got), len(want))
			}
		})
	}
}

// TestLoadWholeFolder loads the shared data folder at once: every file with its own detected
// format, the notes (SOURCES.md, README.txt) ignored.
func TestLoadWholeFolder(t *testing.T) {
	ps, err := Load(sharedData(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	perDataset := map[string]int{}
	for _, p := range ps {
		perDataset[p.Dataset]++
	}
	want := map[string]int{"gsm8k": 1319 + 7473, "math500": 500, "amc23": 40, "aime24": 30, "aime25": 30 + 30, "math": 5000 + 7498}
	if len(perDataset) != len(want) {
		t.Errorf("datasets %v, want %v", perDataset, want)
	}
	for d, n := range want {
		if perDataset[d] != n {
			t.Errorf("dataset %s: %d problems, want %d", d, perDataset[d], n)
		}
	}
}

// BenchmarkLoad times the largest shared sets: 7,500 per-problem files, and one JSONL file.
func BenchmarkLoad(b *testing.B) {
	root := sharedData(b)
	for _, path := range []string{"math/train", "gsm8k/train.jsonl", "math/test.jsonl"} {
		b.Run(path, func(b *testing.B) {
			for b.Loop() {
				if _, err := Load(filepath.Join(root, path), Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
