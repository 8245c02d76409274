package recipe

import "fmt"

// Applied is what --recipe did to a run, as its config.json records it; a resume compares
// it with the saved one, so it holds only what reads back the same.
type Applied struct {
	Name   string  `json:"name"`
	Source string  `json:"source"`
	Set    []Value `json:"set"`
	// Overrides are the recipe's settings that flags given explicitly replaced.
	Overrides []Override `json:"overrides,omitempty"`
}

// Value is a Setting with its value as text ("0.8", "256"): JSON would read a number back
// as a float64 where the recipe has an int.
type Value struct {
	Flag   string `json:"flag"`
	Value  string `json:"value"`
	Source string `json:"source"`
	// Given is set when the command line gave the flag, with the recipe's own value: the
	// run keeps it as given (a LoRA run does not scale an explicit --lr).
	Given bool `json:"given,omitempty"`
}

// Recorded is a setting as Applied records it.
func Recorded(s Setting) Value {
	return Value{Flag: s.Flag, Value: fmt.Sprint(s.Value), Source: s.Source}
}

// Arg is the value as a command line gives it.
func (v Value) Arg() string { return Flag(v.Flag) + " " + v.Value }

// Override is a recipe's setting and the flag given instead: its name, not its value,
// which the rest of the config holds (--steps may change on a resume).
type Override struct {
	Recipe Value  `json:"recipe"`
	Flag   string `json:"given_flag"`
}
