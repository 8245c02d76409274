package grade

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/umad-dev/umad/internal/sharedtest"
)

func sharedDir(t testing.TB) string { return sharedtest.Path(t, "data") }

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// readJSONL decodes every line of a JSONL file into a map.
func readJSONL(t testing.TB, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer f.Close()
	var rows []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for line := 1; sc.Scan(); line++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var row map[string]any
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatalf("%s:%d: %v", path, line, err)
		}
		rows = append(rows, row)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	if len(rows) == 0 {
		t.Fatalf("%s has no rows", path)
	}
	return rows
}

func field(t testing.TB, row map[string]any, name, where string) string {
	t.Helper()
	switch v := row[name].(type) {
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	t.Fatalf("%s: field %q is %T, want string or number", where, name, row[name])
	return ""
}

// amcGold formats AMC23's float answers the way they are printed in the
// file (27.0), so the test sees the pitfall SOURCES.md warns about.
func amcGold(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// boxedGold is the reference's gold of a MATH solution: the inside of its
// last box.
func boxedGold(t testing.TB, solution, where string) string {
	t.Helper()
	boxed, ok := LastBoxedOnlyString(solution)
	if !ok {
		t.Fatalf("%s: solution has no closed box", where)
	}
	ans, ok := RemoveBoxed(boxed)
	if !ok {
		t.Fatalf("%s: RemoveBoxed(%q) failed", where, boxed)
	}
	return ans
}

type gold struct{ where, answer string }

// allGolds collects every gold answer of every shared data file.
func allGolds(t testing.TB) []gold {
	t.Helper()
	dir := sharedDir(t)
	var golds []gold
	add := func(where, answer string) { golds = append(golds, gold{where, answer}) }

	for _, name := range []string{"test", "train"} {
		path := filepath.Join(dir, "gsm8k", name+".jsonl")
		for i, row := range readJSONL(t, path) {
			where := fmt.Sprintf("%s row %d", path, i+1)
			sol := field(t, row, "answer", where)
			j := strings.LastIndex(sol, "#### ")
			if j < 0 {
				t.Fatalf("%s: no '#### ' line", where)
			}
			add(where, strings.ReplaceAll(strings.TrimSpace(sol[j+5:]), ",", ""))
		}
	}
	for i, row := range readJSONL(t, filepath.Join(dir, "math500", "test.jsonl")) {
		add(fmt.Sprintf("math500 row %d", i+1), field(t, row, "answer", "math500"))
	}
	for i, row := range readJSONL(t, filepath.Join(dir, "math", "test.jsonl")) {
		where := fmt.Sprintf("math/test row %d", i+1)
		add(where, boxedGold(t, field(t, row, "solution", where), where))
	}
	trainFiles, err := filepath.Glob(filepath.Join(dir, "math", "train", "*", "*.json"))
	if err != nil || len(trainFiles) != 7500 {
		t.Fatalf("math/train: %d files (err %v), want 7500", len(trainFiles), err)
	}
	for _, path := range trainFiles {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("read %s: %v", path, err)
		}
		var row map[string]any
		if err := json.Unmarshal(raw, &row); err != nil {
			t.Fatalf("decode %s: %v", path, err)
		}
		add(path, boxedGold(t, field(t, row, "solution", path), path))
	}
	for i, row := range readJSONL(t, filepath.Join(dir, "amc23", "test.jsonl")) {
		v, ok := row["answer"].(float64)
		if !ok {
			t.Fatalf("amc23 row %d: answer is %T, want a JSON number", i+1, row["answer"])
		}
		add(fmt.Sprintf("amc23 row %d", i+1), amcGold(v))
	}
	for _, f := range []string{"aime24/test.jsonl", "aime25/aime25.jsonl", "aime25/test.jsonl"} {
		for i, row := range readJSONL(t, filepath.Join(dir, f)) {
			where := fmt.Sprintf("%s row %d", f, i+1)
			add(where, field(t, row, "answer", where))
		}
	}
	return golds
}

// TestGoldAnswersEqualThemselves: every gold answer of every data set must be
// equal to itself in both modes and get one key, or grading a correct
// answer could fail.
func TestGoldAnswersEqualThemselves(t *testing.T) {
	golds := allGolds(t)
	if len(golds) < 1319+7473+500+5000+7500+40+90 {
		t.Fatalf("collected %d gold answers, fewer than the data sets hold", len(golds))
	}
	for _, g := range golds {
		if !StrictEquiv(g.answer, g.answer) {
			t.Errorf("%s: StrictEquiv(%q, itself) = false", g.where, g.answer)
		}
		if !RobustEquiv(g.answer, g.answer) {
			t.Errorf("%s: RobustEquiv(%q, itself) = false", g.where, g.answer)
		}
		if k1, k2 := Key(g.answer), Key(g.answer); k1 != k2 || k1 == "" {
			t.Errorf("%s: Key(%q) = %q then %q", g.where, g.answer, k1, k2)
		}
	}
}

// TestMATH500SolutionMatchesAnswer: the boxed answer of each solution is the
// row's answer in both modes (the data set's own consistency, through our
// extractors).
func TestMATH500SolutionMatchesAnswer(t *testing.T) {
	dir := sharedDir(t)
	rows := readJSONL(t, filepath.Join(dir, "math500", "test.jsonl"))
	if len(rows) != 500 {
		t.Fatalf("math500 has %d rows, want 500", len(rows))
	}
	for i, row := range rows {
		where := fmt.Sprintf("math500 row %d", i+1)
		solution, answer := field(t, row, "solution", where), field(t, row, "answer", where)
		if !StrictScore(solution, answer) {
			t.Errorf("%s: StrictScore(solution, %q) = false", where, answer)
		}
		extracted, ok := Extract(solution, ExtractOptions{})
		if !ok {
			t.Errorf("%s: Extract found no answer in the solution", where)
			continue
		}
		if !RobustEquiv(extracted, answer) {
			t.Errorf("%s: RobustEquiv(%q, %q) = false", where, extracted, answer)
		}
		if Key(extracted) != Key(answer) {
			t.Errorf("%s: Key(%q) = %q, Key(%q) = %q", where, extracted, Key(extracted), answer, Key(answer))
		}
	}
}

// TestCompetitionGoldPitfalls: the formats SOURCES.md warns about are equal
// to a model's plain integer answer in robust mode, and strict keeps the
// reference's behaviour.
func TestCompetitionGoldPitfalls(t *testing.T) {
	dir := sharedDir(t)
	var checked int
	for i, row := range readJSONL(t, filepath.Join(dir, "aime24", "test.jsonl")) {
		gold := field(t, row, "answer", "aime24")
		n, err := strconv.Atoi(gold)
		if err != nil {
			t.Fatalf("aime24 row %d: answer %q is not an integer", i+1, gold)
		}
		model := strconv.Itoa(n)
		if !RobustEquiv(model, gold) || Key(model) != Key(gold) {
			t.Errorf("aime24 row %d: robust %q vs %q: equal=%v keys %q %q", i+1, model, gold, RobustEquiv(model, gold), Key(model), Key(gold))
		}
		if strings.HasPrefix(gold, "0") {
			checked++
			if StrictEquiv(model, gold) {
				t.Errorf("aime24 row %d: strict mode accepted %q for %q; the reference keeps leading zeros", i+1, model, gold)
			}
		}
	}
	if checked != 7 {
		t.Errorf("found %d AIME24 golds with leading zeros, SOURCES.md lists 7", checked)
	}
	for i, row := range readJSONL(t, filepath.Join(dir, "amc23", "test.jsonl")) {
		v := row["answer"].(float64)
		gold, model := amcGold(v), strconv.Itoa(int(v))
		if !RobustEquiv(model, gold) || Key(model) != Key(gold) {
			t.Errorf("amc23 row %d: robust %q vs %q: equal=%v", i+1, model, gold, RobustEquiv(model, gold))
		}
		if StrictEquiv(model, gold) {
			t.Errorf("amc23 row %d: strict mode accepted %q for %q; the reference compares strings", i+1, model, gold)
		}
	}
	if !RobustEquiv("25", "025") || !RobustEquiv("27", "27.0") {
		t.Error(`robust: "25" vs "025" or "27" vs "27.0" not equal`)
	}
}
