package xdsconv

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

func TestUnsupportedNamesTheFirstSetField(t *testing.T) {
	err := Unsupported(Set("a", false), Set("b.c", true), Set("d", true))
	if err == nil || err.Error() != "b.c is not supported" {
		t.Fatalf("got %v, want the first set field (b.c) named", err)
	}
	if err := Unsupported(Set("a", false)); err != nil {
		t.Fatalf("nothing set: got %v", err)
	}
}

func TestInlineDataRefusesFiles(t *testing.T) {
	b, err := InlineData(&corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: "x"}})
	if err != nil || string(b) != "x" {
		t.Fatalf("inline_string: %q, %v", b, err)
	}
	if _, err := InlineData(&corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: "/etc/passwd"}}); err == nil {
		t.Fatal("a filename data source was read; want it refused")
	}
}
