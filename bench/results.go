package bench

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/umad-dev/umad/internal/atomicfile"
)

// Machine describes where a benchmark ran.
func Machine() string {
	cpu := "unknown CPU"
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	return fmt.Sprintf("%s, %d logical CPUs, %s/%s, %s", cpu, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
}

// Today is the date stamped on results.
func Today() string { return time.Now().UTC().Format("2006-01-02") }

// UpdateSection replaces the text between "<!-- name:begin -->" and "<!-- name:end -->"
// in the results file (appending the section if it is new), leaving the rest as it was.
func UpdateSection(path, name, body string) error {
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	begin, end := "<!-- "+name+":begin -->", "<!-- "+name+":end -->"
	block := begin + "\n" + strings.TrimSpace(body) + "\n" + end
	text := string(old)
	i, j := strings.Index(text, begin), strings.Index(text, end)
	switch {
	case i >= 0 && j > i:
		text = text[:i] + block + text[j+len(end):]
	case len(text) == 0:
		text = "# umad benchmark results\n\nEach section is rewritten by the command it names; figures are from the date shown.\n\n" + block + "\n"
	default:
		text = strings.TrimRight(text, "\n") + "\n\n" + block + "\n"
	}
	return atomicfile.WriteBytes(path, []byte(text))
}
