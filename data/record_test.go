package data

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestAnswerText(t *testing.T) {
	tests := []struct {
		why  string
		in   any
		want string
	}{
		{"AMC's float gold reads as an integer", json.Number("27.0"), "27"},
		{"negative integral float", json.Number("-1.0"), "-1"},
		{"exponent form of an integer", json.Number("1e3"), "1000"},
		{"a fraction keeps its spelling", json.Number("2.50"), "2.50"},
		{"an integer keeps its spelling", json.Number("3159"), "3159"},
		{"leading zeros of a string are kept (AIME)", "025", "025"},
		{"parquet double", 27.0, "27"},
		{"parquet double fraction", 0.125, "0.125"},
		{"parquet int64", int64(-12), "-12"},
		{"parquet int32", int32(7), "7"},
		{"parquet binary without a string annotation", []byte("x"), "x"},
		{"a bool is not an answer", true, ""},
		{"null", nil, ""},
	}
	for _, tt := range tests {
		if got := AnswerText(tt.in); got != tt.want {
			t.Errorf("%s: AnswerText(%#v) = %q, want %q", tt.why, tt.in, got, tt.want)
		}
	}
}

func TestLevelOf(t *testing.T) {
	tests := []struct {
		why  string
		in   any
		want int
	}{
		{"MATH's spelling", "Level 3", 3},
		{"any case, spaces around", " level 5 ", 5},
		{"MATH500's integer", json.Number("2"), 2},
		{"parquet int64", int64(4), 4},
		{"MATH's unknown level", "Level ?", 0},
		{"negative is not a level", "-1", 0},
		{"missing", nil, 0},
	}
	for _, tt := range tests {
		if got := levelOf(tt.in); got != tt.want {
			t.Errorf("%s: levelOf(%#v) = %d, want %d", tt.why, tt.in, got, tt.want)
		}
	}
}

func TestNaturalCompare(t *testing.T) {
	got := []string{"b/10.json", "a/10.json", "b/9.json", "a/2.json", "a/02.json", "a/1.json"}
	slices.SortFunc(got, naturalCompare)
	want := []string{"a/1.json", "a/02.json", "a/2.json", "a/10.json", "b/9.json", "b/10.json"}
	if !slices.Equal(got, want) {
		t.Errorf("sorted %v, want %v", got, want)
	}
}

func TestStripInstruction(t *testing.T) {
	tests := []struct{ why, in, want string }{
		{"MATH suffix after a space", `Find x. Let's think step by step and output the final answer within \boxed{}.`, "Find x."},
		{"GSM8K suffix after a newline", "Find y.\nLet's think step by step and output the final answer after \"####\".", "Find y."},
		{"trailing whitespace after the suffix", `Find z. Let's think step by step and output the final answer within \boxed{}.` + "\n", "Find z."},
		{"no suffix: unchanged, trailing space kept", "Find w. ", "Find w. "},
		{"the phrase inside the text is not a suffix", `Let's think step by step and output the final answer within \boxed{}. Then stop.`, `Let's think step by step and output the final answer within \boxed{}. Then stop.`},
	}
	for _, tt := range tests {
		if got := stripInstruction(tt.in); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.why, got, tt.want)
		}
	}
}
