package sampler

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestParamsValidate(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	cases := []struct {
		name    string
		p       Params
		wantErr string // substring; empty means valid
	}{
		{"plain sampling", Params{Temperature: 1, TopP: 1}, ""},
		{"greedy", Params{Temperature: 0, TopP: 1}, ""},
		{"all filters on", Params{Temperature: 0.6, TopK: 20, TopP: 0.95, MinP: 0.05}, ""},
		{"smallest top-p", Params{Temperature: 1, TopP: math.SmallestNonzeroFloat64}, ""},
		{"largest min-p", Params{Temperature: 1, TopP: 1, MinP: math.Nextafter(1, 0)}, ""},
		{"tiny but invertible temperature", Params{Temperature: 1e-300, TopP: 1}, ""},
		{"negative temperature", Params{Temperature: -0.1, TopP: 1}, "temperature"},
		{"NaN temperature", Params{Temperature: nan, TopP: 1}, "temperature"},
		{"infinite temperature", Params{Temperature: inf, TopP: 1}, "temperature"},
		{"temperature whose inverse overflows", Params{Temperature: 1e-310, TopP: 1}, "too small"},
		{"negative top-k", Params{Temperature: 1, TopK: -1, TopP: 1}, "top-k"},
		{"zero top-p (the zero value)", Params{Temperature: 1}, "top-p"},
		{"top-p above 1", Params{Temperature: 1, TopP: 1.01}, "top-p"},
		{"NaN top-p", Params{Temperature: 1, TopP: nan}, "top-p"},
		{"negative min-p", Params{Temperature: 1, TopP: 1, MinP: -0.01}, "min-p"},
		{"min-p of 1 keeps only ties", Params{Temperature: 1, TopP: 1, MinP: 1}, "min-p"},
		{"NaN min-p", Params{Temperature: 1, TopP: 1, MinP: nan}, "min-p"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.p.Validate()
			if c.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate(%+v) = %v, want nil", c.p, err)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrParams) || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("Validate(%+v) = %v, want an ErrParams error mentioning %q", c.p, err, c.wantErr)
			}
			// Sample must refuse the same parameters without consuming randomness.
			rng := NewStream(1)
			before := rng
			if _, err := Sample([]float32{0, 1}, c.p, &rng); !errors.Is(err, ErrParams) {
				t.Fatalf("Sample with %+v: err = %v, want ErrParams", c.p, err)
			}
			if rng != before {
				t.Fatal("a rejected call advanced the stream")
			}
		})
	}
}
