package h1corpus

import (
	"fmt"
	"strings"
)

// Table markers around the deviation table in docs/dev/http1-corpus.md.
const (
	TableBegin = "<!-- deviations: begin (written by go test ./internal/proxy -run TestH1Corpus -update-corpus) -->"
	TableEnd   = "<!-- deviations: end -->"
)

// DeviationTable renders, as Markdown, every case of the corpora (keyed by
// corpus name, in the order given) whose outcome today is not one the RFCs
// allow: the codec's to-do list.
func DeviationTable(names []string, corpora map[string][]*Case) string {
	var b strings.Builder
	b.WriteString("| corpus | case | RFC | RFC allows | Portico does | Envoy |\n|---|---|---|---|---|---|\n")
	for _, name := range names {
		for _, c := range corpora[name] {
			if c.Conforms() {
				continue
			}
			wants := make([]string, len(c.Want))
			for i, w := range c.Want {
				wants[i] = "`" + w.String() + "`"
			}
			envoy := c.Envoy
			if envoy == "" {
				envoy = "as the RFC"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | `%s` | %s |\n", name, c.Name, cell(c.RFC),
				cell(strings.Join(wants, " or ")), cell(c.Today.String()), cell(envoy))
		}
	}
	return b.String()
}

// cell keeps a table cell on one row.
func cell(s string) string {
	return strings.ReplaceAll(s, "|", `\|`)
}

// ReplaceTable puts table between the markers of doc.
func ReplaceTable(doc, table string) (string, error) {
	before, rest, ok := strings.Cut(doc, TableBegin)
	if !ok {
		return "", fmt.Errorf("no %q marker", TableBegin)
	}
	_, after, ok := strings.Cut(rest, TableEnd)
	if !ok {
		return "", fmt.Errorf("no %q marker", TableEnd)
	}
	return before + TableBegin + "\n" + table + TableEnd + after, nil
}
