// Package run holds umad's runs as typed values, outside the CLI, each with its settings
// as fields, resolved, checked, planned and run by its methods:
//   - a debate evaluation (Debate, in debate*.go), which `umad debate`, `umad
//     experiment`'s cells and the determinism check build alike;
//   - a training run (Train, in train*.go), which `umad train`, `umad experiment`'s
//     training cells and `umad bench train` run;
//   - a supervised warm start (SFT, in sft.go), which `umad sft` runs;
//   - an experiment's grid of debates and trainings (Experiment, in experiment*.go),
//     which `umad experiment` plans and runs;
//   - `umad bench train` itself (TrainBench, in benchtrain*.go): its runs of a training
//     request timed by phase against the limits measured beside them;
//   - `umad report`'s work (Report, in report.go): each run's report rebuilt and the
//     runs side by side.
//
// Debates and trainings start as a request (DebateRequest, TrainRequest) set key by key,
// the keys being the flags' names, by flags, cells and a recipe alike (keys.go). The
// package also claims a run's directory for its settings (rundir.go).
package run
