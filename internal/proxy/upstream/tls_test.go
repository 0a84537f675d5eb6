package upstream

import "testing"

func TestDNSNameMatch(t *testing.T) {
	for _, tc := range []struct {
		name, san string
		want      bool
	}{
		{"api.example.com", "api.example.com", true},
		{"API.example.com", "api.EXAMPLE.com", true},
		{"api.example.com", "*.example.com", true},
		{"a.b.example.com", "*.example.com", false},
		{"example.com", "*.example.com", false},
		{".example.com", "*.example.com", false}, // the label must not be empty
		{"api.example.com", "*.other.com", false},
		{"api.example.com", "api.example.co", false},
	} {
		if got := dnsNameMatch(tc.name, tc.san); got != tc.want {
			t.Errorf("dnsNameMatch(%q, %q) = %v, want %v", tc.name, tc.san, got, tc.want)
		}
	}
}
