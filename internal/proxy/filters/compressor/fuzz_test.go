package compressor

import (
	"testing"
)

// FuzzChoose: whatever Accept-Encoding a client sends, the negotiation never panics,
// and an encoding it picks is one of a compressor that takes the content type. (It may
// also pick identity, or "*" where Envoy's own choice ends on the wildcard it added to
// its map: no compressor's encoding, so the response is not compressed, as in Envoy.)
func FuzzChoose(f *testing.F) {
	f.Add("gzip;q=0, *", "text/plain")
	f.Add("br;q=0.5, gzip;q=0.5, identity;q=0.5", "text/html")
	f.Add("*;q=1, *, identity;q=nan, zstd;q=inf", "application/json")
	f.Add(";;q=,=;,", "")
	f.Add("gzip;q=1e100", "text/plain")
	gz := registered{c: &config{lib: &library{encoding: "gzip"}, types: typeSet(defaultContentTypes)}}
	br := registered{c: &config{lib: &library{encoding: "br"}, types: typeSet([]string{"text/html"}), chooseFirst: true}}
	zs := registered{c: &config{lib: &library{encoding: "zstd"}, types: typeSet(defaultContentTypes)}}
	chain := []registered{gz, br, zs}
	f.Fuzz(func(t *testing.T, accept, ct string) {
		got := choose(accept, ct, chain)
		if got == identity || got == wildcard {
			return
		}
		var lib *config
		for _, e := range chain {
			if e.c.lib.encoding == got {
				lib = e.c
			}
		}
		switch {
		case lib == nil:
			t.Fatalf("Accept-Encoding %q, %q: %q, not a compressor's encoding", accept, ct, got)
		case ct != "" && !lib.typeListed(ct):
			t.Fatalf("Accept-Encoding %q: %q for %q, which it does not compress", accept, got, ct)
		}
	})
}
