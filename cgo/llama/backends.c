// Loading ggml backend libraries (ggml's CUDA backend, built by ./build.sh cuda).
#include <dlfcn.h>
#include <stdio.h>
#include "ggml-backend.h"

void umad_log_cb(enum ggml_log_level level, const char *text, void *user_data);

// umad_backend_load loads the backend library at path. Its ggml base library (base, beside
// it) is opened first so that its log callback can be pointed at umad's: the backend's
// messages ("no CUDA-capable device is detected") then arrive as log lines instead of
// being printed on stderr by a second copy of ggml. Returns NULL on failure with a message.
ggml_backend_reg_t umad_backend_load(const char *path, const char *base, char *err, size_t errlen) {
    void *h = dlopen(base, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        snprintf(err, errlen, "%s", dlerror());
        return NULL;
    }
    void (*set_log)(ggml_log_callback, void *) = (void (*)(ggml_log_callback, void *))dlsym(h, "ggml_log_set");
    if (set_log != NULL) set_log(umad_log_cb, NULL);
    ggml_backend_reg_t reg = ggml_backend_load(path);
    if (reg == NULL) snprintf(err, errlen, "ggml_backend_load failed");
    return reg;
}
