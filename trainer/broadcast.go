package trainer

// Moving a file or a set of tensors from one rank to the others of a process group, in
// broadcasts: how a group's first rank gives the ranks outside it what its engine got in a
// sync (groups.go).

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"unsafe"

	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/internal/atomicfile"
	"github.com/umad-dev/umad/safetensors"
)

// syncChunk is how much of a file one broadcast carries to the engines outside a group.
const syncChunk = 64 << 20

// broadcastSize sends n from root to the group's ranks, which return it.
func broadcastSize(g *torch.Group, root int, n int64) (int64, error) {
	b := binary.LittleEndian.AppendUint64(nil, uint64(n))
	if err := g.Broadcast(b, root); err != nil {
		return 0, err
	}
	return int64(binary.LittleEndian.Uint64(b)), nil
}

// sendFile sends the file at path from root (this rank) to the group's other ranks
// (receiveFile), a chunk at a time.
func sendFile(g *torch.Group, root int, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if _, err := broadcastSize(g, root, fi.Size()); err != nil {
		return err
	}
	buf := make([]byte, min(fi.Size(), syncChunk))
	for left := fi.Size(); left > 0; {
		n := min(left, syncChunk)
		if _, err := io.ReadFull(f, buf[:n]); err != nil {
			return fmt.Errorf("%s: %w", path, err) // the others fail at their timeout
		}
		if err := g.Broadcast(buf[:n], root); err != nil {
			return err
		}
		left -= n
	}
	return nil
}

// receiveFile writes root's file (sendFile) to path, atomically; when the write fails it
// still takes every chunk, so that root is not left waiting.
func receiveFile(g *torch.Group, root int, path string) error {
	size, err := broadcastSize(g, root, 0)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return errors.Join(err, drain(g, root, size))
	}
	var taken int64
	var lost error // the group failed: nothing more comes
	err = atomicfile.Write(path, func(w io.Writer) error {
		buf := make([]byte, min(size, syncChunk))
		for taken < size {
			buf = buf[:min(size-taken, syncChunk)]
			if lost = g.Broadcast(buf, root); lost != nil {
				return lost
			}
			taken += int64(len(buf))
			if _, err := w.Write(buf); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil && lost == nil && taken < size {
		return errors.Join(err, drain(g, root, size-taken))
	}
	return err
}

// drain takes the rest of a file that could not be written.
func drain(g *torch.Group, root int, left int64) error {
	buf := make([]byte, min(left, syncChunk))
	for ; left > 0; left -= int64(len(buf)) {
		buf = buf[:min(left, syncChunk)]
		if err := g.Broadcast(buf, root); err != nil {
			return err
		}
	}
	return nil
}

// tensorHeader describes a tensor that sendWeights sends.
type tensorHeader struct {
	Name  string
	DType safetensors.DType
	Shape []int64
	Bytes int
}

// sendWeights sends weights from root (this rank) to the group's other ranks
// (receiveWeights): their headers, then each tensor's bytes.
func sendWeights(g *torch.Group, root int, weights []safetensors.TensorView) error {
	hs := make([]tensorHeader, len(weights))
	for i, w := range weights {
		hs[i] = tensorHeader{w.Name, w.DType, w.Shape, len(w.Data)}
	}
	b, err := json.Marshal(hs)
	if err != nil {
		return err
	}
	if _, err := broadcastSize(g, root, int64(len(b))); err != nil {
		return err
	}
	if err := g.Broadcast(b, root); err != nil {
		return err
	}
	for _, w := range weights {
		if err := g.Broadcast(w.Data, root); err != nil {
			return err
		}
	}
	return nil
}

// receiveWeights returns root's weights (sendWeights).
func receiveWeights(g *torch.Group, root int) ([]safetensors.TensorView, error) {
	n, err := broadcastSize(g, root, 0)
	if err != nil {
		return nil, err
	}
	b := make([]byte, n)
	if err := g.Broadcast(b, root); err != nil {
		return nil, err
	}
	var hs []tensorHeader
	if err := json.Unmarshal(b, &hs); err != nil {
		return nil, fmt.Errorf("the weights' headers from the group's leader: %w", err)
	}
	out := make([]safetensors.TensorView, len(hs))
	for i, h := range hs {
		out[i] = safetensors.TensorView{Name: h.Name, DType: h.DType, Shape: h.Shape, Data: make([]byte, h.Bytes)}
		if err := g.Broadcast(out[i].Data, root); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// broadcastFloats sends root's v to the group's ranks, whose v has the same length.
func broadcastFloats(g *torch.Group, root int, v []float32) error {
	if len(v) == 0 {
		return nil
	}
	return g.Broadcast(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v)), root)
}
