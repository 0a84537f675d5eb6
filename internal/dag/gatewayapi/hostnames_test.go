package gatewayapi

import (
	"slices"
	"testing"
)

func TestIntersectHostnames(t *testing.T) {
	for _, tc := range []struct {
		listener string
		route    []string
		want     []string
	}{
		{"", nil, []string{"*"}},
		{"", []string{"a.example.com"}, []string{"a.example.com"}},
		{"foo.example.com", nil, []string{"foo.example.com"}},
		{"foo.example.com", []string{"*.example.com"}, []string{"foo.example.com"}},
		{"foo.example.com", []string{"bar.example.com"}, nil},
		{"*.example.com", []string{"a.b.example.com", "example.com", "A.example.com"}, []string{"a.b.example.com", "a.example.com"}},
		{"*.example.com", []string{"*.b.example.com"}, []string{"*.b.example.com"}},
		{"*.b.example.com", []string{"*.example.com"}, []string{"*.b.example.com"}},
		{"*.example.com", []string{"*.example.com", "x.example.com"}, []string{"*.example.com", "x.example.com"}},
	} {
		if got := intersectHostnames(tc.listener, tc.route); !slices.Equal(got, tc.want) {
			t.Errorf("intersectHostnames(%q, %q) = %q, want %q", tc.listener, tc.route, got, tc.want)
		}
	}
}

func TestOwnerHostname(t *testing.T) {
	listeners := []string{"", "*.example.com", "*.b.example.com", "a.example.com"}
	for host, want := range map[string]string{
		"a.example.com":   "a.example.com",
		"x.example.com":   "*.example.com",
		"x.b.example.com": "*.b.example.com",
		"*.b.example.com": "*.b.example.com",
		"other.org":       "",
		"*":               "",
	} {
		if got, ok := ownerHostname(listeners, host); !ok || got != want {
			t.Errorf("ownerHostname(%q) = %q, %t; want %q", host, got, ok, want)
		}
	}
	if _, ok := ownerHostname([]string{"a.example.com"}, "b.example.com"); ok {
		t.Error("a host no listener matches has an owner")
	}
}
