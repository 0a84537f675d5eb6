package upstream

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// The byte loops writeRequestHead uses agree with the strings functions they
// replace, on every byte alone and on random values around them.
func TestFieldByteHelpersAgreeWithStrings(t *testing.T) {
	isCTLRune := func(r rune) bool { return r < ' ' || r == 0x7f }
	values := []string{"", " ", "\t\t", " a b ", "\xff\xfe", "é", "\u2028"}
	for c := range 256 {
		values = append(values, string([]byte{byte(c)}), "a"+string([]byte{byte(c)})+"b")
	}
	const alphabet = " \t\r\n\x00\x7fa\xc3\xa9"
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		b := make([]byte, rng.IntN(12))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		values = append(values, string(b))
	}
	for _, v := range values {
		if got, want := hasLineBreak(v), strings.ContainsAny(v, "\r\n"); got != want {
			t.Errorf("hasLineBreak(%q) = %v, want %v", v, got, want)
		}
		if got, want := trimBlanks(v), strings.Trim(v, " \t"); got != want {
			t.Errorf("trimBlanks(%q) = %q, want %q", v, got, want)
		}
		if got, want := hasCTL(v), strings.ContainsFunc(v, isCTLRune); got != want {
			t.Errorf("hasCTL(%q) = %v, want %v", v, got, want)
		}
	}
}
