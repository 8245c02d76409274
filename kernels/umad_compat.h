// Where the libtorch versions the plugin builds against differ, in one place. The plugin
// builds against 1.13 (Debian 12) and 2.x (Debian 13's 2.6, pip wheels 2.4 to 2.10); every
// version test in kernels/ names one of the macros below.
#ifndef UMAD_COMPAT_H
#define UMAD_COMPAT_H

#include <torch/version.h>

#define UMAD_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

// The range the plugin is built and tested for. Outside it the build stops with one line
// naming both versions; -DUMAD_TORCH_UNTESTED (CMake: -DUMAD_TORCH_UNTESTED=ON) lets a newer
// libtorch through at the user's risk.
#if !UMAD_TORCH_AT_LEAST(1, 13)
#error "libtorch " TORCH_VERSION " is older than 1.13, the oldest libtorch umad's plugin builds against"
#endif
#if UMAD_TORCH_AT_LEAST(2, 11) && !defined(UMAD_TORCH_UNTESTED)
#error "libtorch " TORCH_VERSION " is newer than 2.10, the newest libtorch umad's plugin is tested with; configure with -DUMAD_TORCH_UNTESTED=ON to build anyway"
#endif

// 2.0: fused scaled-dot-product attention (at::scaled_dot_product_attention), and c10d's
// ProcessGroup split into a dispatcher and per-device backends (c10d::Backend).
#define UMAD_HAS_SDPA UMAD_TORCH_AT_LEAST(2, 0)
#define UMAD_HAS_C10D_BACKEND UMAD_TORCH_AT_LEAST(2, 0)

// 2.2: TCPStore has a libuv server, the default from 2.4; Debian's 2.6 is built without
// libuv and refuses it. The plugin keeps the server every version has.
#define UMAD_TCPSTORE_HAS_LIBUV UMAD_TORCH_AT_LEAST(2, 2)

// 2.5: SDPA takes grouped-query heads as they are (enable_gqa), without copies of k and v.
#define UMAD_HAS_SDPA_GQA UMAD_TORCH_AT_LEAST(2, 5)

// 2.3: c10::Allocator::allocate is no longer const, and copy_data (used by clone) became a
// pure virtual every allocator implements.
#if UMAD_TORCH_AT_LEAST(2, 3)
#define UMAD_ALLOCATE_CONST
#define UMAD_ALLOCATOR_COPY_DATA 1
#else
#define UMAD_ALLOCATE_CONST const
#define UMAD_ALLOCATOR_COPY_DATA 0
#endif

#endif
