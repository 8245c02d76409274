package outpath

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An output is refused when it is an input, lies inside one or holds one, also through a
// symlink; a sibling, or a name that only shares a prefix, is not.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	if err := os.Mkdir(in, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(in, link); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		out, want string
	}{
		{in, "is"},
		{link, "is"},
		{filepath.Join(in, "out"), "lies inside"},
		{filepath.Join(link, "new", "out"), "lies inside"},
		{dir, "contains"},
		{filepath.Join(dir, "other"), ""},
		{in + "2", ""},
	} {
		err := Check(c.out, in)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.out, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), " "+c.want+" the input ")):
			t.Errorf("%s: %v, want %q", c.out, err, c.want)
		}
	}
}
