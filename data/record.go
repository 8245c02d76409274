package data

import (
	"encoding/json"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
)

// record is one source row as generic values: strings, json.Number (JSON) or Go numbers
// (parquet), bools, []any, map[string]any and nil.
type record map[string]any

// row is a record with where it came from, for error messages and default IDs.
type row struct {
	rec   record
	where string // "line 12", "row 3"
	id    string // the ID of a single-problem JSON file; empty gives the row index
}

// fields lists the record's field names, sorted, for error messages.
func (r record) fields() []string {
	names := make([]string, 0, len(r))
	for k := range r {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// has reports whether a field is present with a value.
func (r record) has(key string) bool { return r[key] != nil }

// text returns a field as text; see AnswerText.
func (r record) text(key string) string { return AnswerText(r[key]) }

// firstText returns the first non-blank field of keys as text.
func (r record) firstText(keys ...string) string {
	for _, k := range keys {
		if s := r.text(k); strings.TrimSpace(s) != "" {
			return s
		}
	}
	return ""
}

// group returns a nested struct field, or nil.
func (r record) group(key string) record {
	m, _ := r[key].(map[string]any)
	return m
}

// AnswerText writes a scalar answer (decoded from JSON with json.Number, or read from
// parquet) as text: strings as stored, integral numbers as integers (AMC's 27.0 becomes
// "27"), other numbers as written. Anything else gives "".
func AnswerText(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	case json.Number:
		return numberText(string(v))
	case float64:
		return floatText(v)
	case float32:
		return floatText(float64(v))
	case int:
		return strconv.Itoa(v)
	case int32:
		return strconv.FormatInt(int64(v), 10)
	case int64:
		return strconv.FormatInt(v, 10)
	case uint32:
		return strconv.FormatUint(uint64(v), 10)
	case uint64:
		return strconv.FormatUint(v, 10)
	}
	return ""
}

// numberText rewrites JSON number text only when it is an integral value written as a
// float ("27.0", "1e3"); integers and fractions keep their exact spelling.
func numberText(s string) string {
	if !strings.ContainsAny(s, ".eE") {
		return s
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != math.Trunc(f) {
		return s
	}
	return floatText(f)
}

func floatText(f float64) string {
	if f == math.Trunc(f) && !math.IsInf(f, 0) {
		return strconv.FormatFloat(f, 'f', 0, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// levelOf reads a difficulty level from 3, 3.0, "3" or "Level 3"; anything else, MATH's
// "Level ?" included, is 0 (unknown).
func levelOf(v any) int {
	s := strings.TrimSpace(AnswerText(v))
	if len(s) > 5 && strings.EqualFold(s[:5], "level") {
		s = strings.TrimSpace(s[5:])
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

func warnSkipped(err error) { slog.Warn("skipped row", "err", err) }
