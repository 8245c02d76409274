package torch

// abiVersion is kernels/umad_torch.h's UMAD_TORCH_ABI_VERSION, written again here on
// purpose: Go's build cache does not see headers outside the package, so a bump of the
// header alone would leave a cached cgo build that still expects the old ABI and refuses
// the new plugin. TestABIVersionMatchesHeader keeps the two equal, and changing this file
// rebuilds the package.
const abiVersion = 15
