// Package sharedtest finds ../shared (benchmark data, real tokenizers) for tests: beside
// the repository root, as on developers' machines and in CI. A user's machine does not
// have it: there the tests that need it skip, while in CI (CI=true) they fail.
package sharedtest

import (
	"os"
	"path/filepath"
	"testing"
)

// Path returns ../shared/rel, skipping or failing the test when it is absent.
func Path(t testing.TB, rel string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
	p := filepath.Join(dir, "..", "shared", rel)
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("shared test data missing in CI: %v", err)
		}
		t.Skipf("shared test data not here: %v", err)
	}
	return p
}
