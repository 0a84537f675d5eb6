package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
)

// savedRun is a run's samples as results.json keeps them, so that its tables
// and the targets check can be printed again without measuring (-results).
type savedRun struct {
	// Sides in the order of the tables: Portico, nginx, then the others.
	Sides     []string        `json:"sides"`
	Scenarios []savedScenario `json:"scenarios"`
}

type savedScenario struct {
	Name    string                   `json:"name"`
	Samples map[string][]savedSample `json:"samples"`
}

// savedSample is a sample; P99ms is absent where the load generator reports
// none (h2load).
type savedSample struct {
	RPS      float64  `json:"rps"`
	P99ms    *float64 `json:"p99_ms,omitempty"`
	Requests int64    `json:"requests"`
	Failed   int64    `json:"failed"`
	CPUSec   float64  `json:"cpu_s"`
	SysSec   float64  `json:"sys_s"`
	RSSMB    float64  `json:"rss_mb"`
	AnonMB   float64  `json:"anon_mb,omitempty"`
}

func saveResults(path string, sides []string, results []scenarioResult) error {
	run := savedRun{Sides: sides}
	for _, r := range results {
		sc := savedScenario{Name: r.sc.name, Samples: map[string][]savedSample{}}
		for side, ss := range r.samples {
			for _, s := range ss {
				sc.Samples[side] = append(sc.Samples[side], saveSample(s))
			}
		}
		run.Scenarios = append(run.Scenarios, sc)
	}
	data, err := json.MarshalIndent(run, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

func saveSample(s sample) savedSample {
	out := savedSample{RPS: s.rps, Requests: s.requests, Failed: s.failed, CPUSec: s.cpuSec, SysSec: s.sysSec, RSSMB: s.rssMB, AnonMB: s.anonMB}
	if !math.IsNaN(s.p99ms) {
		p99 := s.p99ms
		out.P99ms = &p99
	}
	return out
}

func loadResults(path string) ([]string, []scenarioResult, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var run savedRun
	if err := json.Unmarshal(data, &run); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	var results []scenarioResult
	for _, saved := range run.Scenarios {
		sc, ok := scenarioNamed(saved.Name)
		if !ok {
			return nil, nil, fmt.Errorf("%s: unknown scenario %q", path, saved.Name)
		}
		r := scenarioResult{sc: sc, samples: map[string][]sample{}}
		for side, ss := range saved.Samples {
			for _, s := range ss {
				r.samples[side] = append(r.samples[side], loadSample(s))
			}
		}
		results = append(results, r)
	}
	return run.Sides, results, nil
}

func loadSample(s savedSample) sample {
	out := sample{rps: s.RPS, p99ms: math.NaN(), requests: s.Requests, failed: s.Failed, cpuSec: s.CPUSec, sysSec: s.SysSec, rssMB: s.RSSMB, anonMB: s.AnonMB}
	if s.P99ms != nil {
		out.p99ms = *s.P99ms
	}
	return out
}
