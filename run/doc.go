// Package run holds umad's runs as typed values, outside the CLI: a debate evaluation
// (Debate, in debate*.go) with its settings as fields, resolved, checked, planned, opened
// and run by its methods, so that `umad debate`, `umad experiment`'s cells and the
// determinism check build the same value instead of command lines; and a training run
// (Train, in train*.go: resolved, loaded, checked, planned and run), which `umad train`,
// `umad experiment`'s training cells and `umad bench train` run. It also claims a run's
// directory for its settings (rundir.go), and does umad report's work (Report, report.go).
package run
