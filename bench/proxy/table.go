package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// printTable prints the medians per side and the ratios of the first side
// (Portico) to the second (nginx), as a Markdown table.
func printTable(w io.Writer, results []scenarioResult, sides []string) {
	if len(sides) < 2 {
		return
	}
	if len(sides) > 2 {
		defer printAgainst(w, results, sides, sides[1])
	}
	if len(sides) > 2 && sides[2] == "baseline" {
		defer printBaseline(w, results, sides[0], sides[2])
	}
	a, b := sides[0], sides[1]
	fmt.Fprintf(w, "\nMedians of each side's rounds (RSS: the largest at the end of a round); ratio = %s / %s.\n\n", a, b)
	fmt.Fprintf(w, "| scenario | %s req/s | %s req/s | ratio | %s p99 ms | %s p99 ms | ratio | %s CPU s/100k req | %s CPU s/100k req | ratio | %s user/kernel µs/req | %s user/kernel µs/req | %s RSS MB | %s RSS MB | ratio |\n", a, b, a, b, a, b, a, b, a, b)
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range results {
		sa, sb := r.samples[a], r.samples[b]
		rpsA, rpsB := medianOf(sa, rpsOf), medianOf(sb, rpsOf)
		p99A, p99B := medianOf(sa, p99Of), medianOf(sb, p99Of)
		cpuA, cpuB := medianOf(sa, sample.cpuPer100k), medianOf(sb, sample.cpuPer100k)
		rssA, rssB := maxRSS(sa), maxRSS(sb)
		fmt.Fprintf(w, "| %s%s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.sc.title, failedMark(sa, sb),
			num(rpsA, 0), num(rpsB, 0), ratio(rpsA, rpsB),
			num(p99A, 2), num(p99B, 2), ratio(p99A, p99B),
			num(cpuA, 2), num(cpuB, 2), ratio(cpuA, cpuB),
			userKernel(sa), userKernel(sb),
			num(rssA, 0), num(rssB, 0), ratio(rssA, rssB))
	}
}

// printBaseline compares Portico with the baseline build: the medians of
// each side's rounds, and the rounds paired (each round runs both builds one
// after the other), whose ratios tell a change from the machine's drift
// better than medians taken apart.
func printBaseline(w io.Writer, results []scenarioResult, a, base string) {
	fmt.Fprintf(w, "\n%s against %s, measured in the same rounds (ratio = %s / %s; paired: the median of the rounds' own ratios, and in how many rounds %s did better).\n\n", a, base, a, base, a)
	fmt.Fprintf(w, "| scenario | %s req/s | %s req/s | ratio | %s CPU s/100k req | %s CPU s/100k req | ratio | paired req/s | paired CPU/req | paired user/req |\n", a, base, a, base)
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range results {
		sa, sb := r.samples[a], r.samples[base]
		rpsA, rpsB := medianOf(sa, rpsOf), medianOf(sb, rpsOf)
		cpuA, cpuB := medianOf(sa, sample.cpuPer100k), medianOf(sb, sample.cpuPer100k)
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.sc.title, num(rpsA, 0), num(rpsB, 0), ratio(rpsA, rpsB),
			num(cpuA, 2), num(cpuB, 2), ratio(cpuA, cpuB),
			paired(sa, sb, rpsOf, true), paired(sa, sb, sample.cpuPer100k, false), paired(sa, sb, sample.userPerRequest, false))
	}
}

// paired is the median of a's and b's ratios of f round by round, and in how
// many rounds a did better (a higher f when higherBetter, else a lower one):
// "0.95x (4 of 5)". Rounds without a figure on either side are left out.
func paired(a, b []sample, f func(sample) float64, higherBetter bool) string {
	var ratios []float64
	better := 0
	for i := range min(len(a), len(b)) {
		x, y := f(a[i]), f(b[i])
		if math.IsNaN(x) || math.IsNaN(y) || y == 0 {
			continue
		}
		ratios = append(ratios, x/y)
		if higherBetter && x > y || !higherBetter && x < y {
			better++
		}
	}
	if len(ratios) == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2fx (%d of %d)", median(ratios), better, len(ratios))
}

// printAgainst compares every side with ref (nginx), scenario by scenario: the table
// of the HTTP/1.1 codec evaluation (docs/dev/http1-codec.md).
func printAgainst(w io.Writer, results []scenarioResult, sides []string, ref string) {
	fmt.Fprintf(w, "\nEvery side against %s, measured in the same rounds (ratios = side / %s).\n\n", ref, ref)
	fmt.Fprintln(w, "| scenario | side | req/s | ratio | p99 ms | ratio | CPU s/100k req | ratio | user/kernel µs/req | RSS MB | ratio |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range results {
		sr := r.samples[ref]
		rpsRef, p99Ref, cpuRef, rssRef := medianOf(sr, rpsOf), medianOf(sr, p99Of), medianOf(sr, sample.cpuPer100k), maxRSS(sr)
		for _, name := range sides {
			ss := r.samples[name]
			if len(ss) == 0 {
				continue // a side the scenario skipped
			}
			rps, p99, cpu, rss := medianOf(ss, rpsOf), medianOf(ss, p99Of), medianOf(ss, sample.cpuPer100k), maxRSS(ss)
			fmt.Fprintf(w, "| %s | %s%s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.sc.name, name, failedMark(ss),
				num(rps, 0), ratio(rps, rpsRef), num(p99, 2), ratio(p99, p99Ref),
				num(cpu, 2), ratio(cpu, cpuRef), userKernel(ss), num(rss, 0), ratio(rss, rssRef))
		}
	}
}

// oneHost is the scenario a virtual-host scenario is compared with: the same
// connections, one host configured.
const oneHost = "c32"

// printVhosts compares each side's figures with many virtual hosts configured
// to its figures with one, when the run has both scenarios.
func printVhosts(w io.Writer, results []scenarioResult, sides []string) {
	one, ok := resultNamed(results, oneHost)
	if !ok {
		return
	}
	for _, many := range results {
		if many.sc.vhosts == 0 {
			continue
		}
		n := fmt.Sprintf("%dk", many.sc.vhosts/1000)
		fmt.Fprintf(w, "\n%s: the %s scenario with %d more virtual hosts configured and each request for one of them, against %s (one host); ratio = %s hosts / 1 host.\n\n",
			many.sc.name, oneHost, many.sc.vhosts, oneHost, n)
		fmt.Fprintf(w, "| side | 1 host req/s | %[1]s hosts req/s | ratio | 1 host CPU s/100k req | %[1]s hosts CPU s/100k req | ratio | 1 host p99 ms | %[1]s hosts p99 ms | 1 host RSS MB | %[1]s hosts RSS MB |\n", n)
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, name := range sides {
			s1, sn := one.samples[name], many.samples[name]
			rps1, rpsN := medianOf(s1, rpsOf), medianOf(sn, rpsOf)
			cpu1, cpuN := medianOf(s1, sample.cpuPer100k), medianOf(sn, sample.cpuPer100k)
			fmt.Fprintf(w, "| %s%s%s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", name, routesNote(name), failedMark(s1, sn),
				num(rps1, 0), num(rpsN, 0), ratio(rpsN, rps1),
				num(cpu1, 2), num(cpuN, 2), ratio(cpuN, cpu1),
				num(medianOf(s1, p99Of), 2), num(medianOf(sn, p99Of), 2),
				num(maxRSS(s1), 0), num(maxRSS(sn), 0))
		}
		fmt.Fprintln(w)
		for _, name := range sides {
			s1, sn := one.samples[name], many.samples[name]
			fmt.Fprintf(w, "%s hosts vs 1 host, %s%s: req/s %s, CPU per request %s\n", n, name, routesNote(name),
				ratio(medianOf(sn, rpsOf), medianOf(s1, rpsOf)), ratio(medianOf(sn, sample.cpuPer100k), medianOf(s1, sample.cpuPer100k)))
		}
	}
}

// routesNote marks the bare sides, which forward every host alike.
func routesNote(side string) string {
	if strings.HasPrefix(side, "bare-") {
		return " (no routing)"
	}
	return ""
}

func resultNamed(results []scenarioResult, name string) (scenarioResult, bool) {
	i := slices.IndexFunc(results, func(r scenarioResult) bool { return r.sc.name == name })
	if i < 0 {
		return scenarioResult{}, false
	}
	return results[i], true
}

func rpsOf(s sample) float64 { return s.rps }
func p99Of(s sample) float64 { return s.p99ms }

func medianOf(ss []sample, f func(sample) float64) float64 { return median(values(ss, f)) }

// maxRSS is the largest RSS at the end of a round (NaN without rounds).
func maxRSS(ss []sample) float64 {
	if len(ss) == 0 {
		return math.NaN()
	}
	return slices.Max(values(ss, func(s sample) float64 { return s.rssMB }))
}

// userKernel is a side's median CPU per request in user space and in the
// kernel, in microseconds.
func userKernel(ss []sample) string {
	return num(median(values(ss, sample.userPerRequest)), 1) + " / " + num(median(values(ss, sample.sysPerRequest)), 1)
}

// failedMark flags a scenario where some requests failed.
func failedMark(samples ...[]sample) string {
	for _, ss := range samples {
		for _, s := range ss {
			if s.failed > 0 {
				return " (some requests failed: see the rounds)"
			}
		}
	}
	return ""
}

func values(ss []sample, f func(sample) float64) []float64 {
	out := make([]float64, len(ss))
	for i, s := range ss {
		out[i] = f(s)
	}
	return out
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func num(x float64, decimals int) string {
	if math.IsNaN(x) {
		return "n/a"
	}
	return strconv.FormatFloat(x, 'f', decimals, 64)
}

func ratio(a, b float64) string {
	if math.IsNaN(a) || math.IsNaN(b) || b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

func formatMS(ms float64) string {
	if math.IsNaN(ms) {
		return "n/a"
	}
	return strconv.FormatFloat(ms, 'f', 2, 64) + "ms"
}
