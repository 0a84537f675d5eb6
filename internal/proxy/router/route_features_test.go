package router

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/portico-dev/portico/internal/proxy/upstream"
)

// firstQueryValue reads the raw first value of a parameter, as Envoy's
// query parameter matcher does.
func TestFirstQueryValue(t *testing.T) {
	for q, want := range map[string]string{"v=a&v=b": "a", "x=1&v=": "", "v": "", "w=1": "-", "": "-", "vv=1&v=2": "2", "v=a%20b": "a%20b"} {
		got, ok := firstQueryValue(q, "v")
		if !ok {
			got = "-"
		}
		if got != want {
			t.Errorf("first value of v in %q = %q, want %q", q, got, want)
		}
	}
}

func TestHashPolicyCookieAndQueryEvaluation(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "http://x/p?u=alice&u=bob", nil)
	r.Header["Cookie"] = []string{"a=1", ` route="abc"; b=2`}
	ri := &RequestInfo{RawQuery: r.URL.RawQuery, Header: r.Header}
	pc, cookies := HashRequest([]HashPolicy{{Kind: HashQueryParameter, Name: "u"}}, r, ri)
	if !pc.HasHash || pc.Hash != upstream.XXHash64String("alice") || cookies != nil {
		t.Errorf("query_parameter: %+v %v, want the hash of the first value", pc, cookies)
	}
	pc, cookies = HashRequest([]HashPolicy{{Kind: HashCookie, Name: "route", HasTTL: true, TtlSeconds: 5}}, r, ri)
	if !pc.HasHash || pc.Hash != upstream.XXHash64String("abc") || cookies != nil {
		t.Errorf("cookie: %+v %v, want the hash of the unquoted value and no new cookie", pc, cookies)
	}
	if pc, _ := HashRequest([]HashPolicy{{Kind: HashCookie, Name: "none"}}, r, ri); pc.HasHash {
		t.Errorf("absent cookie without ttl hashed: %+v", pc)
	}
	if pc, _ := HashRequest([]HashPolicy{{Kind: HashQueryParameter, Name: "none"}}, r, ri); pc.HasHash {
		t.Errorf("absent parameter hashed: %+v", pc)
	}
}
