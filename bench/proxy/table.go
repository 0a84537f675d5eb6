package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
)

// printTable prints the medians per side and the ratios of the first side
// (Portico) to the second (nginx), as a Markdown table.
func printTable(w io.Writer, results []scenarioResult, sides []*side) {
	if len(sides) < 2 {
		return
	}
	if len(sides) > 2 {
		defer printAgainst(w, results, sides, sides[1].name)
	}
	if len(sides) > 2 && sides[2].name == "baseline" {
		defer printBaseline(w, results, sides[0].name, sides[2].name)
	}
	a, b := sides[0].name, sides[1].name
	fmt.Fprintf(w, "\nMedians of each side's rounds; ratio = %s / %s.\n\n", a, b)
	fmt.Fprintf(w, "| scenario | %s req/s | %s req/s | ratio | %s p99 ms | %s p99 ms | ratio | %s CPU s/100k req | %s CPU s/100k req | ratio | %s user/kernel µs/req | %s user/kernel µs/req | %s RSS MB | %s RSS MB |\n", a, b, a, b, a, b, a, b, a, b)
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range results {
		sa, sb := r.samples[a], r.samples[b]
		rpsA, rpsB := median(values(sa, func(s sample) float64 { return s.rps })), median(values(sb, func(s sample) float64 { return s.rps }))
		p99A, p99B := median(values(sa, func(s sample) float64 { return s.p99ms })), median(values(sb, func(s sample) float64 { return s.p99ms }))
		cpuA, cpuB := median(values(sa, sample.cpuPer100k)), median(values(sb, sample.cpuPer100k))
		rssA, rssB := slices.Max(values(sa, func(s sample) float64 { return s.rssMB })), slices.Max(values(sb, func(s sample) float64 { return s.rssMB }))
		fmt.Fprintf(w, "| %s%s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.0f | %.0f |\n", r.sc.title, failedMark(sa, sb),
			num(rpsA, 0), num(rpsB, 0), ratio(rpsA, rpsB),
			num(p99A, 2), num(p99B, 2), ratio(p99A, p99B),
			num(cpuA, 2), num(cpuB, 2), ratio(cpuA, cpuB),
			userKernel(sa), userKernel(sb),
			rssA, rssB)
	}
}

// printBaseline compares Portico with the baseline build.
func printBaseline(w io.Writer, results []scenarioResult, a, base string) {
	fmt.Fprintf(w, "\n%s against %s, measured in the same rounds (ratio = %s / %s).\n\n", a, base, a, base)
	fmt.Fprintf(w, "| scenario | %s req/s | %s req/s | ratio | %s CPU s/100k req | %s CPU s/100k req | ratio |\n", a, base, a, base)
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
	for _, r := range results {
		sa, sb := r.samples[a], r.samples[base]
		rpsA, rpsB := median(values(sa, func(s sample) float64 { return s.rps })), median(values(sb, func(s sample) float64 { return s.rps }))
		cpuA, cpuB := median(values(sa, sample.cpuPer100k)), median(values(sb, sample.cpuPer100k))
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", r.sc.title, num(rpsA, 0), num(rpsB, 0), ratio(rpsA, rpsB),
			num(cpuA, 2), num(cpuB, 2), ratio(cpuA, cpuB))
	}
}

// printAgainst compares every side with ref (nginx), scenario by scenario: the table
// of the HTTP/1.1 codec evaluation (docs/dev/http1-codec.md).
func printAgainst(w io.Writer, results []scenarioResult, sides []*side, ref string) {
	fmt.Fprintf(w, "\nEvery side against %s, measured in the same rounds (ratios = side / %s).\n\n", ref, ref)
	fmt.Fprintln(w, "| scenario | side | req/s | ratio | p99 ms | CPU s/100k req | ratio | user/kernel µs/req | RSS MB |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range results {
		rpsRef := median(values(r.samples[ref], func(s sample) float64 { return s.rps }))
		cpuRef := median(values(r.samples[ref], sample.cpuPer100k))
		for _, s := range sides {
			ss := r.samples[s.name]
			rps := median(values(ss, func(s sample) float64 { return s.rps }))
			cpu := median(values(ss, sample.cpuPer100k))
			fmt.Fprintf(w, "| %s | %s%s | %s | %s | %s | %s | %s | %s | %.0f |\n", r.sc.name, s.name, failedMark(ss),
				num(rps, 0), ratio(rps, rpsRef), num(median(values(ss, func(s sample) float64 { return s.p99ms })), 2),
				num(cpu, 2), ratio(cpu, cpuRef), userKernel(ss), slices.Max(values(ss, func(s sample) float64 { return s.rssMB })))
		}
	}
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
