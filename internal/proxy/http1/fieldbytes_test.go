package http1

import (
	"strings"
	"testing"
)

// breaksLine agrees with the strings.ContainsAny it replaces, on every byte.
func TestBreaksLineAgreesWithContainsAny(t *testing.T) {
	for c := range 256 {
		for _, v := range []string{string([]byte{byte(c)}), "value" + string([]byte{byte(c)}) + "é"} {
			if got, want := breaksLine(v), strings.ContainsAny(v, "\r\n\x00"); got != want {
				t.Errorf("breaksLine(%q) = %v, want %v", v, got, want)
			}
		}
	}
}
