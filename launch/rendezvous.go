package launch

// A training rank's place in its process group: joining it, and checking before any work
// that every rank runs the same build with the same configuration.

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/umad-dev/umad/cgo/torch"
)

// Join joins this rank's process group and checks, before any work, that every rank
// runs the same build (binary and torch plugin) with the same resolved configuration.
func Join(rt *torch.Runtime, d Spec, config any) (*torch.Group, error) {
	fp, err := jobFingerprint(rt, config)
	if err != nil {
		return nil, err
	}
	g, err := rt.JoinGroup(torch.GroupOptions{MasterAddr: d.Addr, MasterPort: d.Port, StoreFile: d.StoreFile, Rank: d.Rank, World: d.World,
		Backend: d.Backend, Timeout: d.Timeout})
	if err != nil {
		return nil, err
	}
	if err := g.Agree("build", fp[:32]); err != nil {
		g.Close()
		return nil, fmt.Errorf("the ranks run different umad binaries or torch plugins: %w", err)
	}
	if err := g.Agree("configuration", fp[32:]); err != nil {
		g.Close()
		return nil, fmt.Errorf("the ranks were given different configurations (flags, data, models): %w", err)
	}
	return g, nil
}

// jobFingerprint is the SHA-256 of the executable and the plugin file, then that of the
// configuration's JSON.
func jobFingerprint(rt *torch.Runtime, config any) ([]byte, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	for _, p := range []string{exe, rt.Path()} {
		f, err := os.Open(p)
		if err != nil {
			return nil, fmt.Errorf("fingerprint the build: %w", err)
		}
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("fingerprint the build: %w", err)
		}
	}
	build := h.Sum(nil)
	cfg, err := json.Marshal(config)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(cfg)
	return append(build, sum[:]...), nil
}
