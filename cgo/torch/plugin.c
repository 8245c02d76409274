#include "plugin.h"

#include <dlfcn.h>
#include <stdio.h>

// One table per process: the plugin is loaded once and never unloaded (libtorch does not
// survive dlclose).
static struct {
#define FIELD(ret, name, params, args) __typeof__(&umad_##name) name;
#define FIELD_VOID(name, params, args) FIELD(void, name, params, args)
  UMAD_TORCH_API(FIELD, FIELD_VOID)
#undef FIELD
#undef FIELD_VOID
} api;

int plugin_preload_global(const char* path, char* err, size_t errlen) {
  if (dlopen(path, RTLD_NOW | RTLD_GLOBAL) == NULL) {
    snprintf(err, errlen, "%s", dlerror());
    return 1;
  }
  return 0;
}

static int lookup(void* h, const char* path, const char* name, void** fn, char* err,
                  size_t errlen) {
  *fn = dlsym(h, name);
  if (*fn == NULL) {
    snprintf(err, errlen, "%s lacks symbol %s: rebuild it", path, name);
    return 1;
  }
  return 0;
}

int plugin_load(const char* path, char* err, size_t errlen) {
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    snprintf(err, errlen, "%s", dlerror());
    return 1;
  }
  // The version first: an old plugin may lack newer symbols, and the version names that.
  if (lookup(h, path, "umad_abi_version", (void**)&api.abi_version, err, errlen) != 0) return 1;
  if (api.abi_version() != UMAD_TORCH_ABI_VERSION) return 2;
#define LOOKUP(ret, name, params, args) \
  if (lookup(h, path, "umad_" #name, (void**)&api.name, err, errlen) != 0) return 1;
#define LOOKUP_VOID(name, params, args) LOOKUP(void, name, params, args)
  UMAD_TORCH_API(LOOKUP, LOOKUP_VOID)
#undef LOOKUP
#undef LOOKUP_VOID
  return 0;
}

#define WRAP(ret, name, params, args) \
  ret plugin_##name params { return api.name args; }
#define WRAP_VOID(name, params, args) \
  void plugin_##name params { api.name args; }
UMAD_TORCH_API(WRAP, WRAP_VOID)
#undef WRAP
#undef WRAP_VOID

// The kernel set OpenBLAS chose, when libtorch's BLAS is an OpenBLAS already loaded (Debian's
// libtorch); "" otherwise (pip's libtorch uses MKL).
const char* plugin_blas_core(void) {
  void* h = dlopen("libopenblas.so.0", RTLD_LAZY | RTLD_NOLOAD);
  if (h == NULL) return "";
  const char* (*corename)(void) = (const char* (*)(void))dlsym(h, "openblas_get_corename");
  const char* name = corename == NULL ? "" : corename();
  dlclose(h);  // drops only the reference NOLOAD took; libtorch keeps the library loaded
  return name;
}
