// Package llama is umad's one binding to llama.cpp, compiled from the pinned
// github.com/ollama/ollama module (see docs/ARCHITECTURE.md section 3).
//
// The build entry point (build.sh) sets CGO_CPPFLAGS to the module's llama.cpp and ggml
// include directories, and to llama.cpp's src/ for weights.cpp. Every object (Model, Context, Batch, Adapter) is safe
// against double Close and use after Close: both return ErrClosed instead of crashing.
// Inputs that would make llama.cpp abort (token ids out of range, unknown sequence ids,
// positions past the context) are rejected in Go before the call.
package llama

/*
#cgo LDFLAGS: -lm
#include <stdlib.h>
#include "llama.h"
void umad_llama_log_init(void);
*/
import "C"

import (
	"errors"
	"log/slog"
	"strings"
	"sync"

	// These compile llama.cpp and ggml's CPU backend into the binary.
	_ "github.com/ollama/ollama/llama/llama.cpp/src"
	_ "github.com/ollama/ollama/ml/backend/ggml/ggml/src"
)

// ErrClosed is returned by any method called on a closed Model, Context, Batch or Adapter.
var ErrClosed = errors.New("llama: use after close")

var initOnce sync.Once

// Init initialises llama.cpp's backends once per process; every constructor calls it.
func Init() {
	initOnce.Do(func() {
		C.umad_llama_log_init()
		C.llama_backend_init()
		loadBackends()
	})
}

// lastErr keeps llama.cpp's most recent error log line, so failures that llama.cpp only
// reports through its log (a NULL model, say) can name their cause.
var lastErr struct {
	sync.Mutex
	line string
}

//export umadLlamaLog
func umadLlamaLog(level C.int, text *C.char) {
	msg := strings.TrimRight(C.GoString(text), "\n")
	if msg == "" {
		return
	}
	if level == C.GGML_LOG_LEVEL_ERROR {
		lastErr.Lock()
		lastErr.line = msg
		lastErr.Unlock()
	}
	slog.Debug(msg, "source", "llama.cpp")
}

// takeLastError returns and clears llama.cpp's last error line.
func takeLastError() string {
	lastErr.Lock()
	defer lastErr.Unlock()
	s := lastErr.line
	lastErr.line = ""
	return s
}

// SystemInfo describes the CPU features llama.cpp was compiled with.
func SystemInfo() string {
	Init()
	return C.GoString(C.llama_print_system_info())
}

// MaxSequences is the most parallel sequences one context may hold.
func MaxSequences() int { return int(C.llama_max_parallel_sequences()) }
