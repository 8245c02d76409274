//go:build race

package sampler

// raceEnabled: the race detector makes sync.Pool drop items on purpose, so
// Sample's pooled scratch is reallocated now and then.
const raceEnabled = true
