// Package torchtest opens the libtorch plugin for tests outside cgo/torch.
package torchtest

import (
	"errors"
	"os"
	"testing"

	"github.com/umad-dev/umad/cgo/torch"
)

// Open loads the plugin with one thread (tiny models: more threads only add OpenMP
// barriers). Without a plugin it skips on a developer machine and fails in CI.
func Open(t testing.TB) *torch.Runtime {
	t.Helper()
	rt, err := torch.Open(torch.Options{Threads: 1})
	if errors.Is(err, torch.ErrPluginNotFound) && os.Getenv("CI") != "true" {
		t.Skipf("no torch plugin: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return rt
}
