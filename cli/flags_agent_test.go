package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/umad-dev/umad/internal/testmodel"
)

// An --agent setting with an empty value or given twice is refused, naming it:
// `BASE,adapter=` meant the working directory and `adapter=A,adapter=B` silently took B.
func TestAgentSpecRefusesEmptyAndRepeatedKeys(t *testing.T) {
	gguf := testmodel.GGUF(t, "qwen2")
	for spec, want := range map[string]string{
		gguf + ",adapter=":                      "adapter is empty",
		gguf + ",name=":                         "name is empty",
		gguf + ",seed=":                         "seed is empty",
		gguf + ",adapter=a,adapter=b":           "adapter is given twice",
		gguf + ",temperature=0.5,temperature=1": "temperature is given twice",
	} {
		_, _, err := runApp(t, "debate", "--agent", spec, "--synthetic", "1", "-k", "1", "--turns", "1", "--out", filepath.Join(t.TempDir(), "run"))
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("--agent %q: %v; want one line containing %q", spec, err, want)
		}
	}
}
