package cli

import (
	"os"
	"strings"
	"testing"
)

// TestREADMEListsEveryCommand: the README's command table names every command, so a new
// command cannot ship undocumented.
func TestREADMEListsEveryCommand(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for name := range commands() {
		if !strings.Contains(string(readme), "| `portico "+name) {
			t.Errorf("README.md's command table has no row for `portico %s`", name)
		}
	}
}
