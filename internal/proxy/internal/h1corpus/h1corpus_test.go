package h1corpus

import (
	"os"
	"strings"
	"testing"
)

func load(t *testing.T) map[string][]*Case {
	t.Helper()
	out := map[string][]*Case{}
	for _, name := range []string{"requests", "responses"} {
		cases, err := Load("testdata/" + name + ".txt")
		if err != nil {
			t.Fatal(err)
		}
		out[name] = cases
	}
	return out
}

// Every case says what the proxy does today, so that a codec's change shows.
func TestCorpusComplete(t *testing.T) {
	for name, cases := range load(t) {
		for _, c := range cases {
			if c.Today == (Outcome{}) {
				t.Errorf("%s %s: no today line", name, c.Name)
			}
			if name == "responses" && len(c.Reply) == 0 {
				t.Errorf("%s %s: no reply", name, c.Name)
			}
		}
	}
}

// The docs' deviation table is the corpus's: regenerated with
// go test ./internal/proxy -run TestH1Corpus -update-corpus.
func TestDeviationTableCurrent(t *testing.T) {
	doc, err := os.ReadFile("../../../../docs/dev/http1-corpus.md")
	if err != nil {
		t.Fatal(err)
	}
	want, err := ReplaceTable(string(doc), DeviationTable([]string{"requests", "responses"}, load(t)))
	if err != nil {
		t.Fatal(err)
	}
	if string(doc) != want {
		t.Error("docs/dev/http1-corpus.md's deviation table is not the corpus's: run go test ./internal/proxy -run TestH1Corpus -update-corpus")
	}
}

func TestParseRejects(t *testing.T) {
	for _, text := range []string{
		"=== a\nsend: \"x\"\nwant: 200 open => none\n",                                               // no rfc
		"=== a\nrfc: r\nwant: 200 open => none\n",                                                    // nothing to send
		"=== a\nrfc: r\nsend: x\nwant: 200 open => none\n",                                           // unquoted
		"=== a\nrfc: r\nsend: \"x\"\nwant: 200 open\n",                                               // no backend
		"=== a\nrfc: r\nsend: \"x\"\nwant: 200 open => none\nbogus: 1\n",                             // unknown key
		"=== a\nrfc: r\nsend: \"x\"\nwant: 2 => none\n=== a\nrfc: r\nsend: \"x\"\nwant: 2 => none\n", // twice
	} {
		if _, err := Parse([]byte(text)); err == nil {
			t.Errorf("Parse(%q) accepted it", text)
		}
	}
	cases, err := Parse([]byte("=== a\nrfc: r\nsend: \"ab\" * 3\nwant: 200 open => none\n"))
	if err != nil || string(cases[0].Send) != "ababab" {
		t.Errorf("repeat: %v %q", err, cases[0].Send)
	}
}

func TestSetToday(t *testing.T) {
	in := "=== a\nrfc: r\nsend: \"x\"\nwant: 200 open => none\ntoday: 400 close => none\n\n=== b\nrfc: r\nsend: \"x\"\nwant: 200 open => none\n"
	out := string(SetToday([]byte(in), map[string]Outcome{"a": {"200 open", "none"}, "b": {"close", "none"}}))
	cases, err := Parse([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if !cases[0].Conforms() || cases[1].Today.Answer != "close" || strings.Count(out, "today:") != 2 {
		t.Errorf("SetToday:\n%s", out)
	}
}
