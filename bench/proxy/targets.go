package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// The targets of issue 22 (item 4), Portico against nginx in the same rounds,
// with Portico's defaults on. printTargets says which a run meets: a report for
// the performance notes, never a test (the machine's load moves every figure).

// figure is one measured quantity of a side in a scenario.
type figure struct {
	name     string
	unit     string
	decimals int
	of       func([]sample) float64
}

var (
	reqsPerSec = figure{"requests per second", "req/s", 0, func(ss []sample) float64 { return medianOf(ss, rpsOf) }}
	cpuPerReq  = figure{"CPU per request", "CPU s/100k req", 2, func(ss []sample) float64 { return medianOf(ss, sample.cpuPer100k) }}
	p99Latency = figure{"p99 latency", "ms", 2, func(ss []sample) float64 { return medianOf(ss, p99Of) }}
	rss        = figure{"RSS", "MB", 0, maxRSS}
)

// target bounds Portico's figure over nginx's in one scenario.
type target struct {
	scenario string
	figure   figure
	bound    float64
	atLeast  bool // the ratio must be ≥ bound (else ≤)
}

var issue22Targets = []target{
	{"c32", reqsPerSec, 1.0, true},
	{"c32", cpuPerReq, 1.0, false},
	{"c32", p99Latency, 1.0, false},
	{"c256", reqsPerSec, 1.0, true},
	{"c256", cpuPerReq, 1.0, false},
	{"c256", p99Latency, 1.0, false},
	{"c1", reqsPerSec, 1.0, true},
	{"close", reqsPerSec, 0.8, true},
	{"tls", reqsPerSec, 0.8, true},
	{"h2", reqsPerSec, 0.5, true},
}

// rssBound bounds Portico's RSS over nginx's, in every scenario.
const rssBound = 2.0

// verdict is one row of the check.
type verdict struct {
	target, wanted, measured, figures string
	state                             string // met, missed, not measured
}

const (
	met         = "met"
	missed      = "**missed**"
	notMeasured = "not measured"
)

func judge(ok bool) string {
	if ok {
		return met
	}
	return missed
}

func printTargets(w io.Writer, results []scenarioResult) {
	var rows []verdict
	for _, t := range issue22Targets {
		rows = append(rows, t.check(results))
	}
	rows = append(rows, checkRSS(results))
	rows = append(rows, checkVhosts(results)...)

	fmt.Fprintf(w, "\nIssue 22's targets (item 4): %s against %s, medians of this run's rounds. A report: nothing fails on it.\n\n", porticoSide, nginxSide)
	fmt.Fprintln(w, "| target | wanted | measured | figures | result |")
	fmt.Fprintln(w, "|---|---|---:|---|---|")
	count := map[string]int{}
	var absent []string
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", r.target, r.wanted, r.measured, r.figures, r.state)
		count[r.state]++
		if r.state == notMeasured {
			absent = append(absent, r.target)
		}
	}
	fmt.Fprintf(w, "\nMet %d of %d", count[met], len(rows))
	if len(absent) > 0 {
		fmt.Fprintf(w, "; not measured: %d (run their scenarios: -scenarios %s)", len(absent), strings.Join(missingScenarios(results), ","))
	}
	fmt.Fprintln(w, ".")
	if count[missed] > 0 {
		fmt.Fprintln(w, "For a missed target, `bench/proxy/run.sh -scenarios NAME -rounds 1 -duration 11s -cpuprofile /tmp/NAME.pprof` and `go run ./bench/proxy/cpushare /tmp/NAME.pprof` give the profile its note needs.")
	}
}

func (t target) check(results []scenarioResult) verdict {
	cmp := "≤"
	if t.atLeast {
		cmp = "≥"
	}
	sc, _ := scenarioNamed(t.scenario)
	v := verdict{wanted: fmt.Sprintf("%s %.2fx %s's", cmp, t.bound, nginxSide), target: sc.title + ": " + t.figure.name}
	r, ok := resultNamed(results, t.scenario)
	if !ok {
		v.state = notMeasured
		return v
	}
	sp, sn := r.samples[porticoSide], r.samples[nginxSide]
	p, n := t.figure.of(sp), t.figure.of(sn)
	v.measured = ratio(p, n)
	v.figures = fmt.Sprintf("%s against %s %s%s", num(p, t.figure.decimals), num(n, t.figure.decimals), t.figure.unit, failedMark(sp, sn))
	if math.IsNaN(p) || math.IsNaN(n) || n == 0 {
		v.state = notMeasured
		return v
	}
	if t.atLeast {
		v.state = judge(p/n >= t.bound)
	} else {
		v.state = judge(p/n <= t.bound)
	}
	return v
}

// checkRSS takes the scenario where Portico's RSS is largest against nginx's.
func checkRSS(results []scenarioResult) verdict {
	v := verdict{target: "RSS (largest at the end of a round), every scenario", wanted: fmt.Sprintf("≤ %.2fx %s's", rssBound, nginxSide), state: notMeasured}
	worst := math.Inf(-1)
	for _, r := range results {
		p, n := rss.of(r.samples[porticoSide]), rss.of(r.samples[nginxSide])
		if math.IsNaN(p) || math.IsNaN(n) || n == 0 || p/n <= worst {
			continue
		}
		worst = p / n
		v.measured = fmt.Sprintf("%s (%s)", ratio(p, n), r.sc.name)
		v.figures = fmt.Sprintf("%s against %s MB", num(p, 0), num(n, 0))
		v.state = judge(worst <= rssBound)
	}
	return v
}

// checkVhosts compares Portico's CPU per request with many virtual hosts
// configured to its CPU per request with one; nginx's own ratio, in the
// figures, shows how much of a difference the load generator's script and
// the machine made.
func checkVhosts(results []scenarioResult) []verdict {
	one, haveOne := resultNamed(results, oneHost)
	var rows []verdict
	for _, sc := range allScenarios {
		if sc.vhosts == 0 {
			continue
		}
		v := verdict{target: sc.title + ": CPU per request", wanted: fmt.Sprintf("≤ 1.00x one host's (%s)", oneHost), state: notMeasured}
		many, haveMany := resultNamed(results, sc.name)
		if haveOne && haveMany {
			p1, pn := cpuPerReq.of(one.samples[porticoSide]), cpuPerReq.of(many.samples[porticoSide])
			n1, nn := cpuPerReq.of(one.samples[nginxSide]), cpuPerReq.of(many.samples[nginxSide])
			v.measured = ratio(pn, p1)
			v.figures = fmt.Sprintf("%s against %s %s; req/s %s; %s's own: CPU %s, req/s %s%s",
				num(pn, 2), num(p1, 2), cpuPerReq.unit,
				ratio(reqsPerSec.of(many.samples[porticoSide]), reqsPerSec.of(one.samples[porticoSide])),
				nginxSide, ratio(nn, n1), ratio(reqsPerSec.of(many.samples[nginxSide]), reqsPerSec.of(one.samples[nginxSide])),
				failedMark(one.samples[porticoSide], many.samples[porticoSide]))
			if !math.IsNaN(pn) && !math.IsNaN(p1) && p1 > 0 {
				v.state = judge(pn/p1 <= 1.0)
			}
		}
		rows = append(rows, v)
	}
	return rows
}

// missingScenarios are the scenarios some target needs that the run lacks.
func missingScenarios(results []scenarioResult) []string {
	var need []string
	add := func(name string) {
		if _, ok := resultNamed(results, name); !ok && !slices.Contains(need, name) {
			need = append(need, name)
		}
	}
	for _, t := range issue22Targets {
		add(t.scenario)
	}
	for _, sc := range allScenarios {
		if sc.vhosts > 0 {
			add(oneHost)
			add(sc.name)
		}
	}
	return need
}
