package router

import (
	"net/http"
	"testing"

	"github.com/portico-dev/portico/internal/proxy/upstream"
)

func TestHashPolicyEvaluation(t *testing.T) {
	req := func(remote string, headers map[string][]string) (*http.Request, *RequestInfo) {
		r, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
		r.RemoteAddr = remote
		for k, vs := range headers {
			for _, v := range vs {
				r.Header.Add(k, v)
			}
		}
		return r, &RequestInfo{Authority: "host.example", Header: r.Header}
	}
	ip := HashPolicy{SourceIP: true}
	user := HashPolicy{Header: "x-user"}
	r, ri := req("192.0.2.7:5555", map[string][]string{"X-User": {"b", "a"}})
	if pc := RequestHash([]HashPolicy{ip}, r, ri); !pc.HasHash || pc.Hash != upstream.XXHash64String("192.0.2.7") {
		t.Errorf("source IP hash = %+v, want xxHash64 of the IP without port", pc)
	}
	r2, ri2 := req("198.51.100.1:1", map[string][]string{"X-User": {"a", "b"}})
	if a, b := RequestHash([]HashPolicy{user}, r, ri), RequestHash([]HashPolicy{user}, r2, ri2); a != b || !a.HasHash {
		t.Errorf("header values in another order hash differently: %+v %+v", a, b)
	}
	r3, ri3 := req("192.0.2.7:1", nil)
	if pc := RequestHash([]HashPolicy{user}, r3, ri3); pc.HasHash {
		t.Errorf("absent header produced a hash: %+v", pc)
	}
	// An absent header is skipped; the source IP still hashes.
	if pc := RequestHash([]HashPolicy{user, ip}, r3, ri3); !pc.HasHash || pc.Hash != upstream.XXHash64String("192.0.2.7") {
		t.Errorf("fallback to source IP: %+v", pc)
	}
	// Combining rotates the previous hash: (h1 <<< 1) ^ h2.
	h1, h2 := upstream.XXHash64([]byte("a"), 0), upstream.XXHash64String("192.0.2.7")
	h1 = upstream.XXHash64([]byte("b"), h1)
	if pc := RequestHash([]HashPolicy{user, ip}, r, ri); pc.Hash != (h1<<1|h1>>63)^h2 {
		t.Errorf("combined hash %#x, want %#x", pc.Hash, (h1<<1|h1>>63)^h2)
	}
	// A terminal policy that produced a hash ends the evaluation.
	terminal := HashPolicy{Header: "x-user", Terminal: true}
	if pc := RequestHash([]HashPolicy{terminal, ip}, r, ri); pc.Hash != h1 {
		t.Errorf("terminal policy: hash %#x, want %#x", pc.Hash, h1)
	}
	authority := HashPolicy{Header: ":authority"}
	if pc := RequestHash([]HashPolicy{authority}, r3, ri3); pc.Hash != upstream.XXHash64String("host.example") {
		t.Errorf(":authority hash %#x", pc.Hash)
	}
}
