package engine

import (
	"errors"
	"fmt"

	"github.com/umad-dev/umad/cgo/llama"
	"github.com/umad-dev/umad/model"
	"github.com/umad-dev/umad/peft"
)

// A server's LoRA adapter: the base weights stay loaded and an adapter (llama.cpp's LoRA
// GGUF, `umad convert lora2gguf`) is added to every generation and scoring, so a trainer
// that trains LoRA syncs its rollout engine by swapping a few megabytes instead of
// reloading the model.

// SetAdapter makes the server's engine and its scoring (ExactLogProbs) apply the LoRA adapter
// in the GGUF file at path, at its own alpha/rank scale, in place of the previous one, which
// is freed. The KV cache is cleared, so nothing computed under the previous adapter is
// reused. An adapter that does not fit the model is refused with the reason, and the
// previous one stays. It must not run while the engine generates or the server scores.
func (s *Server) SetAdapter(path string) error {
	if err := s.checkAdapter(path); err != nil {
		return fmt.Errorf("set adapter: %w", err)
	}
	a, err := s.model.LoadAdapter(path)
	if err != nil {
		return fmt.Errorf("set adapter: %w", err)
	}
	old, err := s.swapAdapter(a)
	if err != nil {
		return errors.Join(fmt.Errorf("set adapter %s: %w", path, err), a.Close())
	}
	s.adapterPath = path
	if err := freeAdapter(old); err != nil {
		return fmt.Errorf("set adapter %s: %w", path, err)
	}
	return nil
}

// ClearAdapter returns the server to the base weights, freeing the adapter; without one it
// does nothing.
func (s *Server) ClearAdapter() error {
	if s.adapter == nil {
		return nil
	}
	old, err := s.swapAdapter(nil)
	if err != nil {
		return fmt.Errorf("clear adapter: %w", err)
	}
	s.adapterPath = ""
	if err := freeAdapter(old); err != nil {
		return fmt.Errorf("clear adapter: %w", err)
	}
	return nil
}

// AdapterPath is the file of the adapter applied, "" for none.
func (s *Server) AdapterPath() string { return s.adapterPath }

// Shape is the architecture of the server's GGUF, read once: what adapters are checked
// against and written for.
func (s *Server) Shape() (model.Shape, error) {
	if s.shape == nil {
		sh, err := model.ReadGGUFShape(s.Path())
		if err != nil {
			return model.Shape{}, fmt.Errorf("base model: %w", err)
		}
		s.shape = &sh
	}
	return *s.shape, nil
}

// checkAdapter checks the file against the model with umad's reader, whose errors name
// what does not fit (llama.cpp's say "wrong base model?" at best).
func (s *Server) checkAdapter(path string) error {
	sh, err := s.Shape()
	if err != nil {
		return err
	}
	return peft.CheckLoRAGGUF(path, sh)
}

// swapAdapter applies a (nil: none) to the engine in place of the current adapter and
// returns the previous one, for the caller to free once the swap is recorded; on an error
// the previous one stays applied.
func (s *Server) swapAdapter(a *llama.Adapter) (*llama.Adapter, error) {
	if s.Engine != nil {
		if err := s.Engine.setAdapter(a); err != nil {
			return nil, errors.Join(err, s.Engine.setAdapter(s.adapter))
		}
	}
	old := s.adapter
	s.adapter = a
	return old, nil
}

// freeAdapter frees an adapter swapped out (nil: none). The swap stands when this fails.
func freeAdapter(old *llama.Adapter) error {
	if old == nil {
		return nil
	}
	if err := old.Close(); err != nil {
		return fmt.Errorf("the new adapter is applied, but freeing the previous one failed: %w", err)
	}
	return nil
}

// setAdapter makes the engine's context apply a alone (nil: none) and empties its KV cache.
func (e *Engine) setAdapter(a *llama.Adapter) error {
	if e.ctx == nil {
		return llama.ErrClosed
	}
	if err := e.ctx.ClearAdapters(); err != nil {
		return err
	}
	if a != nil {
		if err := e.ctx.SetAdapter(a, 1); err != nil {
			return err
		}
	}
	return e.ctx.ClearMemory()
}
