package run

// The verifier model's settings: --reward's and --verifier's.

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/umad-dev/umad/grade"
	"github.com/umad-dev/umad/verifier"
)

// parseReward reads --reward: strict, robust, or robust+verifier=MODEL.gguf, which also
// names the verifier model.
func parseReward(s string) (grade.Mode, string, error) {
	name, path, withPath := strings.Cut(s, "=")
	mode, err := grade.ParseMode(name)
	switch {
	case err != nil:
		return "", "", fmt.Errorf("--reward: %w", err)
	case mode == grade.Verified && (!withPath || path == ""):
		return "", "", fmt.Errorf("--reward %s needs its model: %s=MODEL.gguf", s, grade.Verified)
	case mode != grade.Verified && withPath:
		return "", "", fmt.Errorf("--reward %s: only %s takes a model", s, grade.Verified)
	}
	return mode, path, nil
}

// CheckVerifier refuses verifier settings that do not go together: a prompt or budget
// without a model (withModel says one was given), a model without its prompt, a negative
// budget; and a prompt template that does not read, before any work.
func CheckVerifier(model, prompt string, budget time.Duration, withModel bool) error {
	switch {
	case budget < 0:
		return fmt.Errorf("--verifier-budget must not be negative, got %v", budget)
	case model == "" && withModel:
		return errors.New("--verifier-budget and --verifier-prompt need --verifier")
	case model != "" && prompt == "":
		return errors.New("a verifier model needs --verifier-prompt FILE: its prompt template, as its authors publish it (README, \"Verifier model\")")
	case prompt != "":
		_, err := verifier.ReadTemplate(prompt)
		return err
	}
	return nil
}
