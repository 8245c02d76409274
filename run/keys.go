package run

// A run request set key by key: the key is the setting's flag name, which is also an
// experiment file's key. `umad debate`'s and `umad train`'s flags, an experiment's cells
// and a recipe's overlay set the same fields through one table per run (debateKeys,
// trainKeys), so a value reads the same however it is given.

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/umad-dev/umad/recipe"
)

// Keys are a run request's settings by key, as flags, experiment cells and a recipe set
// them (DebateRequest.Keys, TrainRequest.Keys).
type Keys interface {
	// Names are every key, sorted; IsList says a key takes each value given (a repeated flag).
	Names() []string
	IsList(name string) bool
	// IsSet says the key was given (or set by a recipe); Value is its value as the flag
	// holds it, and String that value as text.
	IsSet(name string) bool
	Value(name string) any
	String(name string) string
	// Set reads value as the key's flag reads it and marks the key given.
	Set(name, value string) error
}

// NotRecorded are the keys a run's config.json does not record under "command": its
// directory (the config.json's own), what says how to start rather than what to run, and
// the machine's plugin path.
var NotRecorded = []string{"config", "out", "resume", "dry-run", "check-determinism", "help", "torch-plugin"}

// SetSetting sets one key, as an experiment cell gives it; the error names the setting
// both ways (turns (--turns) "three": ...).
func SetSetting(k Keys, name, value string) error {
	if !slices.Contains(k.Names(), name) {
		return fmt.Errorf("%s is no setting of this run", name)
	}
	if err := k.Set(name, value); err != nil {
		return fmt.Errorf("%s (%s) %q: %w", name, recipe.Flag(name), value, err)
	}
	return nil
}

// Command is the keys given, as a run's config.json records them ("command", for
// --config): by name, all but NotRecorded.
func Command(k Keys) map[string]any {
	out := map[string]any{}
	for _, name := range k.Names() {
		if !k.IsSet(name) || slices.Contains(NotRecorded, name) {
			continue
		}
		v := k.Value(name)
		if d, ok := v.(time.Duration); ok {
			v = d.String()
		}
		out[name] = v
	}
	return out
}

// key is one setting of a request T: set reads a value given as text (as its flag reads
// it) into T; get is the value as the flag holds it; list says each value given is added.
type key[T any] struct {
	set  func(*T, string) error
	get  func(*T) any
	list bool
}

// keys are a request's settings by flag name.
type keys[T any] map[string]key[T]

// typed is a request T with its keys and which were given: its Keys.
type typed[T any] struct {
	keys  keys[T]
	value *T
	given map[string]bool
}

func (t typed[T]) Names() []string {
	var names []string
	for name := range t.keys {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}
func (t typed[T]) IsList(name string) bool   { return t.keys[name].list }
func (t typed[T]) IsSet(name string) bool    { return t.given[name] }
func (t typed[T]) Value(name string) any     { return t.keys[name].get(t.value) }
func (t typed[T]) String(name string) string { return fmt.Sprint(t.Value(name)) }
func (t typed[T]) Set(name, value string) error {
	k, ok := t.keys[name]
	if !ok {
		return fmt.Errorf("%s is no setting of this run", name)
	}
	t.given[name] = true
	return k.set(t.value, value)
}

// field is the key of a field of T whose values parse reads (a flag's parser).
func field[T, V any](ptr func(*T) *V, parse func(string) (V, error)) key[T] {
	return key[T]{
		set: func(t *T, s string) error {
			v, err := parse(s)
			if err == nil {
				*ptr(t) = v
			}
			return err
		},
		get: func(t *T) any { return *ptr(t) },
	}
}

// The parsers of the flags' types, as urfave/cli's flags (Go's flag package) read them.
func parseInt(s string) (int, error) {
	n, err := strconv.ParseInt(s, 0, strconv.IntSize)
	return int(n), err
}
func parseUint(s string) (uint64, error) { return strconv.ParseUint(s, 0, 64) }
func parseText(s string) (string, error) { return s, nil }

// parseFloat also refuses NaN and infinities, as every command's float flags do.
func parseFloat(s string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err == nil && (math.IsNaN(v) || math.IsInf(v, 0)) {
		err = errors.New("want a finite number")
	}
	return v, err
}

func intKey[T any](ptr func(*T) *int) key[T]                { return field(ptr, parseInt) }
func uintKey[T any](ptr func(*T) *uint64) key[T]            { return field(ptr, parseUint) }
func floatKey[T any](ptr func(*T) *float64) key[T]          { return field(ptr, parseFloat) }
func textKey[T any](ptr func(*T) *string) key[T]            { return field(ptr, parseText) }
func boolKey[T any](ptr func(*T) *bool) key[T]              { return field(ptr, strconv.ParseBool) }
func durationKey[T any](ptr func(*T) *time.Duration) key[T] { return field(ptr, time.ParseDuration) }

// notKey is a flag's key that sets a field to its negation (--no-mask, Mask).
func notKey[T any](ptr func(*T) *bool) key[T] {
	return key[T]{set: func(t *T, s string) error {
		v, err := strconv.ParseBool(s)
		if err == nil {
			*ptr(t) = !v
		}
		return err
	}, get: func(t *T) any { return !*ptr(t) }}
}

// listKey is a repeated flag's key: each value given is added.
func listKey[T any](ptr func(*T) *[]string) key[T] {
	return key[T]{set: func(t *T, s string) error { *ptr(t) = append(*ptr(t), s); return nil },
		get: func(t *T) any { return *ptr(t) }, list: true}
}
