package dag

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// The hand-written validators give exactly what the k8s ones give: nothing for the same
// names, the same messages for the others.
var nameValidators = []struct {
	name      string
	fast, k8s func(string) []string
}{
	{"DNS1123Subdomain", isDNS1123Subdomain, validation.IsDNS1123Subdomain},
	{"DNS1123Label", isDNS1123Label, validation.IsDNS1123Label},
	{"DNS1035Label", isDNS1035Label, validation.IsDNS1035Label},
	{"WildcardDNS1123Subdomain", isWildcardDNS1123Subdomain, validation.IsWildcardDNS1123Subdomain},
	{"PortName", isValidPortName, validation.IsValidPortName},
	{"IP", func(s string) []string {
		if isIP(s) {
			return nil
		}
		return []string{"not an IP"}
	}, func(s string) []string {
		if validation.IsValidIP(nil, s) == nil {
			return nil
		}
		return []string{"not an IP"}
	}},
}

var nameSamples = []string{
	"", "a", "A", "0", "-", ".", "*", "*.", "*.a", "*.*.a", "a*.b", "a.", ".a", "a..b", "a-b", "-a", "a-",
	"a--b", "1a", "a1", "1-2", "123", "foo.example.com", "Foo.example.com", "foo_bar", "foo.-bar.com",
	"foo.bar-.com", "http", "h2c", "http-2", "-http", "http-", "1234", "a234567890123456", "a23456789012345",
	strings.Repeat("a", 63), strings.Repeat("a", 64), strings.Repeat("a.", 126) + "a", strings.Repeat("a.", 126) + "ab",
	"*." + strings.Repeat("a.", 125) + "a", "*." + strings.Repeat("a.", 125) + "ab", "10.0.0.1", "10.0.0.01", "1.2.3",
	"::1", "::ffff:1.2.3.4", "fe80::1", "FE80::1", "fe80::1%eth0", "1.2.3.4.5", "app-1.team-1.example.com", "é.com",
	"a\n", "a.b\n",
}

func TestNameValidatorsEqualK8s(t *testing.T) {
	for _, v := range nameValidators {
		for _, s := range nameSamples {
			checkSameValidation(t, v.name, v.fast, v.k8s, s)
		}
	}
	// Random strings over the characters that matter, bounded by count.
	rng := rand.New(rand.NewPCG(3, 4))
	const alphabet = "ab0-.*:Z_"
	for range 20000 {
		b := make([]byte, rng.IntN(20))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		for _, v := range nameValidators {
			checkSameValidation(t, v.name, v.fast, v.k8s, string(b))
		}
	}
}

func FuzzNameValidatorsEqualK8s(f *testing.F) {
	for _, s := range nameSamples {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, v := range nameValidators {
			checkSameValidation(t, v.name, v.fast, v.k8s, s)
		}
	})
}

func checkSameValidation(t *testing.T, name string, fast, k8s func(string) []string, s string) {
	t.Helper()
	if got, want := fast(s), k8s(s); !slices.Equal(got, want) {
		t.Fatalf("%s(%q) = %q, k8s says %q", name, s, got, want)
	}
}
