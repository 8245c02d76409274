package cli

// A run's typed value set key by key: the key is a flag's name, which is also an
// experiment file's key. A command's flags, an experiment's cells and a recipe's overlay
// set the same fields through one table per run (debateKeys), so a value reads the same
// however it is given.

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/recipe"
)

// key is one setting of a run's typed value T: set reads a value given as text (as its
// flag reads it) into T; get is the value as the flag holds it (a recipe compares and
// prints it); list says each value given is added (a repeated flag).
type key[T any] struct {
	set  func(*T, string) error
	get  func(*T) any
	list bool
}

// keys are a run's settings by flag name.
type keys[T any] map[string]key[T]

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

// parseFloat also refuses NaN and infinities, as every command's float flags do
// (checkFloatFlags).
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

// fromFlags sets t from the flags given to c; given records which.
func (ks keys[T]) fromFlags(c *ucli.Context, t *T, given map[string]bool) error {
	for name, k := range ks {
		if !c.IsSet(name) {
			continue
		}
		given[name] = true
		values := []string{c.String(name)}
		if k.list {
			values = c.StringSlice(name)
		}
		for _, v := range values {
			if err := k.set(t, v); err != nil {
				return fmt.Errorf("%s: %w", recipe.Flag(name), err)
			}
		}
	}
	return nil
}

// typed is a run's typed value as a recipe overlays it (applyRecipe's knobs), by its keys.
type typed[T any] struct {
	keys  keys[T]
	value *T
	given map[string]bool
}

func (t typed[T]) IsSet(name string) bool    { return t.given[name] }
func (t typed[T]) Value(name string) any     { return t.keys[name].get(t.value) }
func (t typed[T]) String(name string) string { return fmt.Sprint(t.Value(name)) }
func (t typed[T]) Set(name, value string) error {
	t.given[name] = true // as a flag the recipe sets
	return t.keys[name].set(t.value, value)
}

// setKey sets one key of t, as an experiment cell gives it (its flags tables' names may
// be a flag's alias, which name resolves); the error names the setting both ways.
func (ks keys[T]) setKey(t *T, given map[string]bool, name, value string) error {
	k, ok := ks[name]
	if !ok {
		return fmt.Errorf("%s is no setting of this run", name)
	}
	given[name] = true
	if err := k.set(t, value); err != nil {
		return fmt.Errorf("%s (%s) %q: %w", name, recipe.Flag(name), value, err)
	}
	return nil
}

// command is the settings given as a run's config.json records them ("command", for
// --config), as commandFlags records a command's flags: by name, all but notRecorded.
func (ks keys[T]) command(t *T, given map[string]bool) map[string]any {
	out := map[string]any{}
	for name := range given {
		if slices.Contains(notRecorded, name) {
			continue
		}
		v := ks[name].get(t)
		if d, ok := v.(time.Duration); ok {
			v = d.String()
		}
		out[name] = v
	}
	return out
}
