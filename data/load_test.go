package data

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// numberedSet writes n HF-layout rows with distinct IDs, levels 1-5 and two subjects.
func numberedSet(t *testing.T, n int) string {
	var b strings.Builder
	for i := range n {
		subject := []string{"Algebra", "Geometry"}[i%2]
		fmt.Fprintf(&b, `{"id": "p%d", "problem": "What is %d + 1?", "answer": "%d", "level": "Level %d", "type": %q}`+"\n",
			i, i, i+1, i%5+1, subject)
	}
	return writeFile(t, t.TempDir(), "set.jsonl", b.String())
}

func TestSubsamplingIsSeeded(t *testing.T) {
	path := numberedSet(t, 200)
	load := func(opt Options) []string {
		t.Helper()
		ps, err := Load(path, opt)
		if err != nil {
			t.Fatal(err)
		}
		return idsOf(ps)
	}
	all := load(Options{})
	a := load(Options{SampleRatio: 0.25, Seed: 1})
	if len(a) != 50 {
		t.Fatalf("ratio 0.25 of 200 kept %d, want int(200*0.25) = 50", len(a))
	}
	if again := load(Options{SampleRatio: 0.25, Seed: 1}); !slices.Equal(a, again) {
		t.Error("the same seed chose a different subset or order")
	}
	if b := load(Options{SampleRatio: 0.25, Seed: 2}); slices.Equal(a, b) {
		t.Error("seeds 1 and 2 chose the same subset in the same order")
	}
	if slices.Equal(a, all[:50]) {
		t.Error("the sample is the file's first rows: it was not shuffled")
	}
	for _, id := range a {
		if !slices.Contains(all, id) {
			t.Fatalf("sampled ID %q is not in the file", id)
		}
	}
	if !slices.Equal(load(Options{SampleRatio: 1, Seed: 9}), all) {
		t.Error("ratio 1 must keep every problem in file order")
	}
	if got := load(Options{Limit: 7}); !slices.Equal(got, all[:7]) {
		t.Errorf("limit alone kept %v, want the first 7 rows", got)
	}
	if got := load(Options{SampleRatio: 0.5, Seed: 3, Limit: 10}); !slices.Equal(got, load(Options{SampleRatio: 0.5, Seed: 3})[:10]) {
		t.Error("limit after a sample must keep the sample's first rows")
	}
	if got := load(Options{Levels: []int{2}, Subjects: []string{"geometry"}}); len(got) != 20 {
		t.Errorf("level 2 geometry kept %d of 200, want 20 (every 10th row)", len(got))
	}
}

func TestOptionsAreValidated(t *testing.T) {
	path := numberedSet(t, 3)
	tests := []struct {
		name string
		opt  Options
		want string
	}{
		{"unknown format names the known ones", Options{Format: "csv"}, "known: verl, gsm8k"},
		{"negative limit", Options{Limit: -1}, "negative"},
		{"ratio above one", Options{SampleRatio: 1.5}, "outside [0, 1]"},
		{"ratio that chooses none says so", Options{SampleRatio: 0.2}, "sample ratio 0.2 chooses none of the 3 problems"},
		{"explicit format whose fields are missing", Options{Format: "gsm8k"}, "fields found: answer, id, level, problem, type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(path, tt.opt)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestMalformedJSONL(t *testing.T) {
	path := writeFile(t, t.TempDir(), "bad.jsonl", strings.Join([]string{
		`{"problem": "1+1?", "answer": "2"}`,
		``,
		`{"problem": "2+2?", "answer": `,
		`[1, 2]`,
		`{"problem": "3+3?", "answer": "6"} {"extra": 1}`,
		`{"problem": "", "answer": "0"}`,
		`{"problem": "4+4?", "answer": "8"}`,
	}, "\n"))
	_, err := Load(path, Options{})
	if err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Fatalf("error %v, want one naming line 3, the first malformed line", err)
	}
	ps, err := Load(path, Options{SkipMalformed: true})
	if err != nil {
		t.Fatal(err)
	}
	// Lines 3-6 are skipped: truncated JSON, an array, trailing data, an empty question.
	// IDs stay the row numbers of the good rows.
	if got := goldsOf(ps); !slices.Equal(got, []string{"2", "8"}) {
		t.Errorf("golds %v, want those of lines 1 and 7", got)
	}
}

func TestUnknownLayoutNamesFields(t *testing.T) {
	path := writeFile(t, t.TempDir(), "odd.jsonl", `{"prompt_text": "x", "target": "y"}`+"\n")
	_, err := Load(path, Options{})
	if err == nil || !strings.Contains(err.Error(), "fields found: prompt_text, target") {
		t.Fatalf("error %v, want one listing the fields found", err)
	}
}

// TestJSONForms reads the three shapes a .json file takes: one problem (MATH), an array,
// JSON lines; and a folder holding them, in natural order, ignoring other files.
func TestJSONForms(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "set/algebra/10.json", `{"problem": "p10", "solution": "so $\\boxed{10}$", "level": "Level 2", "type": "Algebra"}`)
	writeFile(t, dir, "set/algebra/2.json", `{"problem": "p2", "solution": "$\\boxed{\\frac{1}{2}}$", "level": "Level ?", "type": "Algebra"}`)
	writeFile(t, dir, "set/README.txt", "not data")
	writeFile(t, dir, "set/.hidden/1.json", "not even JSON")
	array := writeFile(t, dir, "array.json", `[{"question": "q1", "answer": 1.0}, {"question": "q2", "answer": 2.5}]`)
	lines := writeFile(t, dir, "lines.json", `{"question": "q1", "answer": "a"}`+"\n"+`{"question": "q2", "answer": "b"}`+"\n")

	tests := []struct {
		path   string
		ids    []string
		golds  []string
		levels []int
	}{
		{filepath.Join(dir, "set"), []string{"set/algebra/2.json", "set/algebra/10.json"}, []string{`\frac{1}{2}`, "10"}, []int{0, 2}},
		{filepath.Join(dir, "set/algebra/2.json"), []string{"2.json"}, []string{`\frac{1}{2}`}, []int{0}},
		{array, []string{"0", "1"}, []string{"1", "2.5"}, []int{0, 0}},
		{lines, []string{"0", "1"}, []string{"a", "b"}, []int{0, 0}},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.path), func(t *testing.T) {
			ps, err := Load(tt.path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			var levels []int
			for _, p := range ps {
				levels = append(levels, p.Level)
			}
			if !slices.Equal(idsOf(ps), tt.ids) || !slices.Equal(goldsOf(ps), tt.golds) || !slices.Equal(levels, tt.levels) {
				t.Errorf("got IDs %v golds %v levels %v, want %v %v %v", idsOf(ps), goldsOf(ps), levels, tt.ids, tt.golds, tt.levels)
			}
		})
	}
}

// Parquet rows in the layout of verl's preprocessing (§7 of the reference), nullable where
// pyarrow writes them nullable: the prompt list and its elements.
type verlMessage struct {
	Role    *string `parquet:"role,optional"`
	Content *string `parquet:"content,optional"`
}

func message(role, content string) *verlMessage { return &verlMessage{&role, &content} }

type verlRow struct {
	DataSource  string         `parquet:"data_source"`
	Prompt      []*verlMessage `parquet:"prompt,optional,list"`
	Ability     string         `parquet:"ability"`
	RewardModel struct {
		Style       string `parquet:"style"`
		GroundTruth string `parquet:"ground_truth"`
	} `parquet:"reward_model"`
	ExtraInfo struct {
		Split  string  `parquet:"split"`
		Index  int64   `parquet:"index"`
		Subset *string `parquet:"subset,optional"`
	} `parquet:"extra_info"`
	Level *string `parquet:"level,optional"`
	Type  *string `parquet:"type,optional"`
}

func writeParquet[T any](t *testing.T, dir, name string, rows []T) string {
	t.Helper()
	var buf bytes.Buffer
	if err := parquet.Write(&buf, rows); err != nil {
		t.Fatal(err)
	}
	return writeFile(t, dir, name, buf.String())
}

func TestVerlParquet(t *testing.T) {
	subset, level, subject := "math500", "Level 4", "Geometry"
	training := verlRow{DataSource: "DigitalLearningGmbH/MATH-lighteval", Level: &level, Type: &subject,
		Prompt: []*verlMessage{message("user", `Find $x$. Let's think step by step and output the final answer within \boxed{}.`)}}
	training.RewardModel.GroundTruth = `\frac{1}{2}`
	training.ExtraInfo.Index = 41
	evaluation := verlRow{DataSource: "DigitalLearningGmbH/MATH-lighteval",
		Prompt: []*verlMessage{message("system", "Be brief."), message("user", `What is 2+2?  Let's think step by step and output the final answer after "####".`)}}
	evaluation.RewardModel.GroundTruth = "4"
	evaluation.ExtraInfo.Index = 7
	evaluation.ExtraInfo.Subset = &subset
	plain := verlRow{DataSource: "openai/gsm8k", Prompt: []*verlMessage{message("user", "No suffix here.")}}
	plain.RewardModel.GroundTruth = "9"
	plain.ExtraInfo.Index = 8

	ps, err := Load(writeParquet(t, t.TempDir(), "test.parquet", []verlRow{training, evaluation, plain}), Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []Problem{
		{ID: "41", Dataset: "DigitalLearningGmbH/MATH-lighteval", Question: "Find $x$.", Gold: `\frac{1}{2}`, Subject: "Geometry", Level: 4},
		{ID: "7", Dataset: "math500", Question: "What is 2+2?", Gold: "4"},
		{ID: "8", Dataset: "openai/gsm8k", Question: "No suffix here.", Gold: "9"},
	}
	if !slices.Equal(ps, want) {
		t.Errorf("got\n%+v\nwant\n%+v", ps, want)
	}
}

// A Hugging Face export: MathArena's AIME 2025 stores integer answers; MATH-500 has
// unique_id; the file name picks the benchmark when the fields cannot.
func TestHuggingFaceParquet(t *testing.T) {
	type aimeRow struct {
		ProblemIdx  int64  `parquet:"problem_idx"`
		Problem     string `parquet:"problem"`
		Answer      int64  `parquet:"answer"`
		ProblemType string `parquet:"problem_type"`
	}
	rows := []aimeRow{{1, "Find the sum.", 70, "Number Theory"}, {2, "Find the area.", 588, "Geometry"}}
	dir := t.TempDir()
	for _, tt := range []struct{ name, dataset string }{{"train.parquet", "hf"}, {"aime_2025.parquet", "aime25"}} {
		ps, err := Load(writeParquet(t, dir, tt.name, rows), Options{})
		if err != nil {
			t.Fatal(err)
		}
		want := []Problem{
			{ID: "1", Dataset: tt.dataset, Question: "Find the sum.", Gold: "70"},
			{ID: "2", Dataset: tt.dataset, Question: "Find the area.", Gold: "588"},
		}
		if !slices.Equal(ps, want) {
			t.Errorf("%s: got %+v, want %+v", tt.name, ps, want)
		}
	}
}

func TestBadParquet(t *testing.T) {
	path := writeFile(t, t.TempDir(), "broken.parquet", "PAR1 this is not parquet PAR1")
	if _, err := Load(path, Options{}); err == nil || !strings.Contains(err.Error(), "broken.parquet") {
		t.Fatalf("error %v, want one naming the file", err)
	}
}

// FuzzLoadJSONL: whatever a JSONL file holds, loading it with SkipMalformed returns an error
// or problems that all have a question and a gold.
func FuzzLoadJSONL(f *testing.F) {
	f.Add(`{"question": "q", "answer": "#### 1,000"}`)
	f.Add(`{"problem": "p", "solution": "\\boxed{\\frac{1}{2}}"}`)
	f.Add(`{"prompt": [{"role": "user", "content": "c"}], "reward_model": {"ground_truth": 3}}`)
	f.Add(`{"problem": "p", "answer": 2.0, "level": "Level 9"}` + "\n" + `{"problem": 1}`)
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, content string) {
		path := filepath.Join(dir, "fuzz.jsonl")
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		ps, err := Load(path, Options{SkipMalformed: true})
		if err != nil {
			return
		}
		for _, p := range ps {
			if strings.TrimSpace(p.Question) == "" || strings.TrimSpace(p.Gold) == "" {
				t.Fatalf("problem without question or gold: %+v", p)
			}
		}
	})
}
