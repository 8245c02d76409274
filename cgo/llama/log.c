// A C trampoline for llama.cpp's log callback, which must be a C function pointer.
#include "llama.h"
#include "_cgo_export.h"

void umad_log_cb(enum ggml_log_level level, const char *text, void *user_data) {
    (void)user_data;
    umadLlamaLog((int)level, (char *)text);
}

void umad_llama_log_init(void) { llama_log_set(umad_log_cb, NULL); }
