// Package trainspec holds the plain data that describes a training run: the optimizer, the
// LoRA adapters, the precision, the device, the policy loss, the placement of the training
// state and the plugin's memory constants. It is pure Go and imports nothing of umad, so
// the trainer, memplan, hfmodel and the CLI describe a run without the cgo binding, and
// cgo/torch converts these types to its C ABI structs at its door.
package trainspec
