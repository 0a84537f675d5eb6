//go:build race

package kube

// raceEnabled: the race detector slows the controller several times over, so the
// figures TestScale logs under it are not the ones to quote.
const raceEnabled = true
