package http1

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// targetSeeds are targets at the edges of verbatimTarget's fast path.
var targetSeeds = []string{
	"/", "/a/b", "/a?b=c", "/a?", "/a?b?", "/a??", "/?", "/%7e", "/a b", "/\u00fc", "/!", "/a;b=c,d",
	"//x/y", "/a#b", "/\x7f", "/a?\x01", "/a?b c", "/$&+,:;=@-_.~", "/'()*", "/[x]", "/a|b", "*",
	"http://h/p?q", "example.com:443", "", "a/b", "/a\\b", "/a^b`c{d}", "/a?q=%zz",
}

// readTarget gives the URL url.ParseRequestURI gives (net/http's reading),
// its fast path included.
func TestReadTargetAsNetURL(t *testing.T) {
	for _, target := range targetSeeds {
		checkTargetAsNetURL(t, http.MethodGet, target)
		checkTargetAsNetURL(t, http.MethodConnect, target)
	}
}

// The fast path is taken for the usual targets, or it saves nothing.
func TestVerbatimTargetTakesUsualTargets(t *testing.T) {
	for _, target := range []string{"/", "/api/v1/items?id=42&sort=asc", "/static/app.js", "/a-b_c.d~e/@f:g;h=i,j+k$l&m"} {
		if _, _, ok := verbatimTarget(target); !ok {
			t.Errorf("%q: not taken verbatim", target)
		}
	}
}

func FuzzTargetLikeNetURL(f *testing.F) {
	for _, s := range targetSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, target string) {
		checkTargetAsNetURL(t, http.MethodGet, target)
	})
}

func checkTargetAsNetURL(t *testing.T, method, target string) {
	t.Helper()
	want, wantErr := parseTarget(method, target)
	var got url.URL
	err := readTarget(&got, method, target)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%s %q: error %v, net/url's %v", method, target, err, wantErr)
	}
	if err != nil {
		return
	}
	sameUser := cmp.Comparer(func(a, b *url.Userinfo) bool { return (a == nil) == (b == nil) && a.String() == b.String() })
	if diff := cmp.Diff(*want, got, sameUser); diff != "" {
		t.Errorf("%s %q: (-net/url +readTarget)\n%s", method, target, diff)
	}
}
