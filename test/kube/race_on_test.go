//go:build race

package kube

// raceEnabled: the race detector slows the controller several times over, so latency
// bounds are looser under it. The figures that count are measured without it.
const raceEnabled = true
