// The loader of libumad_torch: plugin_load dlopens the plugin and fills a table with its entry
// points, and plugin_<name> calls umad_<name> through that table (cgo cannot call a C function
// pointer). The wrappers are declared from the list in umad_torch.h, so they follow it.
#ifndef UMAD_CGO_PLUGIN_H
#define UMAD_CGO_PLUGIN_H
#include <stddef.h>
#include <stdint.h>
#include "umad_torch.h"

int plugin_preload_global(const char* path, char* err, size_t errlen);
int plugin_load(const char* path, char* err, size_t errlen);
const char* plugin_blas_core(void);

#define PLUGIN_DECLARE(ret, name, params, args) ret plugin_##name params;
#define PLUGIN_DECLARE_VOID(name, params, args) void plugin_##name params;
UMAD_TORCH_API(PLUGIN_DECLARE, PLUGIN_DECLARE_VOID)
#undef PLUGIN_DECLARE
#undef PLUGIN_DECLARE_VOID
#endif
