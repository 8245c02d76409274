// Package run holds umad's runs as typed values, outside the CLI: a debate evaluation
// (Debate, in debate*.go) with its settings as fields, resolved, checked, planned, opened
// and run by its methods, so that `umad debate`, `umad experiment`'s cells and the
// determinism check build the same value instead of command lines; and a training run
// (Train, in train*.go: resolved, loaded, checked, planned and run), which `umad train`,
// `umad experiment`'s training cells and `umad bench train` run; a supervised warm start
// (SFT, in sft.go), which `umad sft` runs; and `umad bench train` itself (TrainBench, in
// benchtrain*.go: its settings as fields, its runs of a training request timed by phase
// against the limits measured beside them). Debates and trainings start as a request
// (DebateRequest, TrainRequest) set key by key, the keys being the flags' names, by
// flags, cells and a recipe alike (keys.go). It also claims a run's directory for its
// settings (rundir.go).
package run
