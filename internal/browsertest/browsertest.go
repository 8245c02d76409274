// Package browsertest loads the HTML pages of the reports in Debian's headless chromium
// for tests: the DOM after the page's script ran, and a screenshot checked not blank.
// Where chromium is missing the tests that need it skip, while in CI (CI=true) they fail.
package browsertest

import (
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Chromium is Debian's headless chromium (build.sh installs it): where it is missing a
// page test skips, or fails under CI=true, where the pages must be checked in a browser.
func Chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed, and CI checks the HTML pages in it (./build.sh deps installs it)")
	}
	t.Skip("chromium is not installed: skipping the HTML page's browser test (apt-get install chromium)")
	return ""
}

// headless runs chromium on a page (a file URL, with its fragment) with a fresh profile
// and a time limit, and returns its standard output.
func headless(t *testing.T, url string, args ...string) []byte {
	t.Helper()
	bin := Chromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	flags := []string{"--headless", "--disable-gpu", "--no-first-run", "--disable-extensions",
		"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=5000"}
	if os.Geteuid() == 0 { // chromium refuses to run as root inside its sandbox
		flags = append(flags, "--no-sandbox")
	}
	cmd := exec.CommandContext(ctx, bin, append(append(flags, args...), url)...)
	var stderr limitedBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %v on %s: %v\n%s", args, url, err, stderr.buf)
	}
	return out
}

// DumpDOM is the page's DOM after its script ran.
func DumpDOM(t *testing.T, page, fragment string) string {
	t.Helper()
	return string(headless(t, fileURL(t, page)+fragment, "--dump-dom"))
}

// Screenshot renders the page and checks that the PNG is not blank: a real share of its
// pixels differ from the top-left one (the page's background).
func Screenshot(t *testing.T, page, fragment string) {
	t.Helper()
	shot := filepath.Join(t.TempDir(), "page.png")
	headless(t, fileURL(t, page)+fragment, "--screenshot="+shot, "--window-size=1200,900", "--hide-scrollbars")
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	b := img.Bounds()
	bg := img.At(b.Min.X, b.Min.Y)
	r0, g0, b0, _ := bg.RGBA()
	differ := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if r, g, bl, _ := img.At(x, y).RGBA(); r != r0 || g != g0 || bl != b0 {
				differ++
			}
		}
	}
	if share := float64(differ) / float64(b.Dx()*b.Dy()); share < 0.01 {
		t.Errorf("screenshot %dx%d is blank: %.4f of its pixels differ from the background", b.Dx(), b.Dy(), share)
	}
}

func fileURL(t *testing.T, path string) string {
	t.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	return "file://" + abs
}

// limitedBuffer keeps the first 64 KiB written to it: chromium's stderr for a failure.
type limitedBuffer struct{ buf []byte }

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := 64<<10 - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}
