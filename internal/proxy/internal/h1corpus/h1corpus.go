// Package h1corpus loads the HTTP/1.1 parser safety corpus: malformed and
// ambiguous requests (testdata/requests.txt) and upstream responses
// (testdata/responses.txt), each with the outcome RFC 9112 / RFC 9110 allow,
// Envoy's documented behaviour where it differs, and the outcome the embedded
// proxy shows today. The corpus is data, independent of any codec: a codec's
// tests feed the same bytes to the proxy over raw TCP and compare outcomes.
//
// # File format
//
// A case starts with "=== name". Its fields, one per line, "key: value":
//
//	rfc:     the sections that decide the case (required)
//	envoy:   Envoy's documented behaviour, where it differs from the RFC's
//	note:    anything else a reader needs
//	send:    bytes the client sends, a Go-quoted string, optionally "* N"
//	         (repeated N times); several send lines are concatenated
//	reply:   (responses.txt) bytes the backend answers, same syntax
//	want:    an outcome the RFCs allow; one line per acceptable outcome
//	today:   the outcome the embedded proxy shows today (exactly one)
//
// An outcome is "ANSWER => BACKEND". ANSWER is what the client got: each
// response's status (responses.txt adds its framing, body and X-Corpus-*
// headers), then "open" (the connection still serves requests), "close"
// (closed by the proxy) or "timeout" (nothing within the deadline). BACKEND
// is "none" or the requests the backend received, separated by " ; ", each
// "METHOD TARGET host=HOST FRAMING BODY [x-corpus-name=value...]", FRAMING one
// of none, length, chunked and BODY Go-quoted. Lines starting with "#" are
// comments.
package h1corpus

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Case is one corpus entry.
type Case struct {
	Name  string
	RFC   string
	Envoy string
	Note  string
	Send  []byte // what the client sends
	Reply []byte // what the backend answers (response corpus only)
	Want  []Outcome
	Today Outcome
	Line  int // where the case starts in its file
}

// Outcome is what the client got and what the backend received.
type Outcome struct {
	Answer  string
	Backend string
}

func (o Outcome) String() string { return o.Answer + " => " + o.Backend }

// ParseOutcome reads "ANSWER => BACKEND".
func ParseOutcome(s string) (Outcome, error) {
	answer, backend, ok := strings.Cut(s, " => ")
	if !ok || strings.TrimSpace(answer) == "" || strings.TrimSpace(backend) == "" {
		return Outcome{}, fmt.Errorf("outcome %q is not \"ANSWER => BACKEND\"", s)
	}
	return Outcome{Answer: strings.TrimSpace(answer), Backend: strings.TrimSpace(backend)}, nil
}

// Conforms says whether today's outcome is one the RFCs allow.
func (c *Case) Conforms() bool {
	for _, w := range c.Want {
		if w == c.Today {
			return true
		}
	}
	return false
}

// FinalResponses is the number of final (non-1xx) responses in an answer.
func FinalResponses(answer string) int {
	n := 0
	for _, f := range strings.Fields(answer) {
		if len(f) == 3 && f[0] >= '2' && f[0] <= '5' {
			if _, err := strconv.Atoi(f); err == nil {
				n++
			}
		}
	}
	return n
}

// Load reads a corpus file.
func Load(path string) ([]*Case, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(data)
}

// Parse reads a corpus from its text.
func Parse(data []byte) ([]*Case, error) {
	var cases []*Case
	var c *Case
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if name, ok := strings.CutPrefix(line, "=== "); ok {
			if err := check(c); err != nil {
				return nil, err
			}
			if seen[name] {
				return nil, fmt.Errorf("line %d: case %q twice", n, name)
			}
			seen[name] = true
			c = &Case{Name: name, Line: n}
			cases = append(cases, c)
			continue
		}
		if c == nil {
			return nil, fmt.Errorf("line %d: %q before the first case", n, line)
		}
		if err := c.set(line); err != nil {
			return nil, fmt.Errorf("line %d (case %s): %w", n, c.Name, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if err := check(c); err != nil {
		return nil, err
	}
	return cases, nil
}

func (c *Case) set(line string) error {
	key, value, ok := strings.Cut(line, ": ")
	if !ok {
		return fmt.Errorf("%q is not \"key: value\"", line)
	}
	switch key {
	case "rfc":
		c.RFC = value
	case "envoy":
		c.Envoy = value
	case "note":
		c.Note = value
	case "send", "reply":
		b, err := parseBytes(value)
		if err != nil {
			return err
		}
		if key == "send" {
			c.Send = append(c.Send, b...)
		} else {
			c.Reply = append(c.Reply, b...)
		}
	case "want", "today":
		o, err := ParseOutcome(value)
		if err != nil {
			return err
		}
		if key == "want" {
			c.Want = append(c.Want, o)
		} else if c.Today != (Outcome{}) {
			return fmt.Errorf("two today lines")
		} else {
			c.Today = o
		}
	default:
		return fmt.Errorf("unknown key %q", key)
	}
	return nil
}

// parseBytes reads a Go-quoted string, optionally followed by "* N".
func parseBytes(v string) ([]byte, error) {
	count := 1
	if i := strings.LastIndex(v, `" * `); i >= 0 {
		n, err := strconv.Atoi(v[i+4:])
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad repeat count in %q", v)
		}
		count, v = n, v[:i+1]
	}
	s, err := strconv.Unquote(v)
	if err != nil {
		return nil, fmt.Errorf("%s is not a Go-quoted string: %w", v, err)
	}
	return []byte(strings.Repeat(s, count)), nil
}

func check(c *Case) error {
	switch {
	case c == nil:
		return nil
	case c.RFC == "":
		return fmt.Errorf("case %s: no rfc line", c.Name)
	case len(c.Send) == 0 && len(c.Reply) == 0:
		return fmt.Errorf("case %s: nothing to send or reply", c.Name)
	case len(c.Want) == 0:
		return fmt.Errorf("case %s: no want line", c.Name)
	}
	return nil
}

// SetToday rewrites the today line of each named case in a corpus file's text
// (inserting one after the case's last want line when it has none), so that a
// test run can record what the proxy does.
func SetToday(data []byte, today map[string]Outcome) []byte {
	lines := strings.Split(string(data), "\n")
	var out []string
	name := ""
	lastWant := -1
	flush := func() {
		if o, ok := today[name]; ok && lastWant >= 0 {
			out = append(out[:lastWant+1], append([]string{"today: " + o.String()}, out[lastWant+1:]...)...)
		}
	}
	for _, line := range lines {
		if n, ok := strings.CutPrefix(line, "=== "); ok {
			flush()
			name, lastWant = n, -1
		}
		if strings.HasPrefix(line, "today: ") {
			if _, ok := today[name]; ok {
				continue
			}
		}
		out = append(out, line)
		if strings.HasPrefix(line, "want: ") {
			lastWant = len(out) - 1
		}
	}
	flush()
	return []byte(strings.Join(out, "\n"))
}
