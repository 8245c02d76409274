package cli

// The verifier model of `grade --verifier`, `debate --verifier` and
// `train --reward robust+verifier=MODEL.gguf`.

import (
	"slices"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/run"
	"github.com/umad-dev/umad/verifier"
)

// verifierLlamaFlags are the llama.cpp flags grade's verifier model runs with: those of
// llamaFlags but --ctx, which the verifier sets itself.
func verifierLlamaFlags() []ucli.Flag {
	return slices.DeleteFunc(llamaFlags(), func(f ucli.Flag) bool { return slices.Contains(f.Names(), "ctx") })
}

// verifierPromptFlag names the verifier's prompt template. umad ships none: the text is
// its authors', and a verifier model answers well only to the one it was trained on.
func verifierPromptFlag() ucli.Flag {
	return &ucli.StringFlag{Name: "verifier-prompt", Usage: "the verifier model's prompt template file, as its authors publish it: " +
		"str.format text with {question}, {gold_answer} and {llm_response} (CompassVerifier's CV_PROMPT; README, \"Verifier model\")"}
}

// openVerifier loads the verifier model with --verifier-prompt's template (checked given),
// the command's llama.cpp flags and threads (0 = the physical cores).
func openVerifier(c *ucli.Context, path string, threads int) (*verifier.Verifier, error) {
	template, err := verifier.ReadTemplate(c.String("verifier-prompt"))
	if err != nil {
		return nil, err
	}
	if err := run.CheckThreads("threads", threads); err != nil {
		return nil, err
	}
	opt, err := engine.ParseOptions(0, 0, threads, c.String("kv-type"), c.String("flash-attn"))
	if err != nil {
		return nil, err
	}
	place, err := placement(c)
	if err != nil {
		return nil, err
	}
	return verifier.Open(path, template, place, opt)
}

// verifierFlags are grade's and debate's verifier model, its prompt, and its budget for
// the whole run.
func verifierFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.StringFlag{Name: "verifier", Usage: "GGUF verifier model for the pairs robust's rules do not decide, asked with --verifier-prompt"},
		verifierPromptFlag(),
		&ucli.DurationFlag{Name: "verifier-budget", Usage: "most time the verifier model may take in all (0 = no limit); the pairs left are counted as skipped"},
	}
}

// checkVerifierFlags refuses verifierFlags that do not go together: a prompt or budget
// without a model, a model without its prompt, a negative budget; and a prompt template
// that does not read, before any work.
func checkVerifierFlags(c *ucli.Context) error {
	return run.CheckVerifier(c.String("verifier"), c.String("verifier-prompt"), c.Duration("verifier-budget"),
		c.IsSet("verifier-budget") || c.IsSet("verifier-prompt"))
}

// openRunVerifier opens verifierFlags' model with the command's threads, for a run of
// its budget; nil without --verifier.
func openRunVerifier(c *ucli.Context, threads int) (*verifier.Session, error) {
	if err := checkVerifierFlags(c); err != nil || c.String("verifier") == "" {
		return nil, err
	}
	v, err := openVerifier(c, c.String("verifier"), threads)
	if err != nil {
		return nil, err
	}
	return &verifier.Session{Verifier: v, Budget: c.Duration("verifier-budget")}, nil
}
