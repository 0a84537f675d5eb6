package router

import (
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/portico-dev/portico/internal/proxy/internal/xdstest"
)

func TestParseHeaderFormat(t *testing.T) {
	host, _ := os.Hostname()
	r := httptest.NewRequest(http.MethodGet, "http://h.example.com/p?q=1", nil)
	r.RemoteAddr = "192.0.2.9:4711"
	r.Header.Set("X-In", "input-value")
	r.Header.Set("X-Alt", "alternative")
	r.Header["Cookie"] = []string{"a=1", "b=2"}
	ri := &RequestInfo{Method: "GET", Scheme: "http", Authority: "h.example.com", Path: "/p", RawQuery: "q=1", Header: r.Header}
	rh := NewRouteHeaders(nil, r, ri, &ClientAddressing{UseRemoteAddress: true})
	for in, want := range map[string]string{
		"plain":                         "plain",
		"100%%":                         "100%",
		"%%REQ(x)%%":                    "%REQ(x)%",
		"<%REQ(x-in)%>":                 "<input-value>",
		"%REQ(X-IN)%":                   "input-value", // header names are case-insensitive
		"%REQ(x-in):5%":                 "input",
		"%REQ(x-none)%":                 "", // an absent header is empty, not "-"
		"%REQ(x-none?x-alt)%":           "alternative",
		"%REQ(x-in?x-alt)%":             "input-value",
		"%REQ(:authority)%%REQ(:path)%": "h.example.com/p?q=1",
		"%REQ(:method)% %REQ(:scheme)%": "GET http",
		"%REQ(host)%":                   "", // Host is :authority in Envoy's header map
		"%REQ(cookie)%":                 "a=1; b=2",
		"ip=%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%": "ip=192.0.2.9",
		"%PROTOCOL%":    "HTTP/1.1",
		"%HOSTNAME%":    host,
		"%HOSTNAME%-%%": host + "-%",
	} {
		f, err := parseHeaderFormat(in)
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		if got := f.eval(rh); got != want {
			t.Errorf("%q = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"50%":                         "no valid command operator at position 2",
		"%foo%":                       "no valid command operator",
		"%START_TIME%":                "%START_TIME% is not supported",
		"%RESP(x)%":                   "%RESP% is not supported",
		"%UPSTREAM_HOST%":             "%UPSTREAM_HOST% is not supported",
		"%REQ%":                       "needs a header name",
		"%REQ()%":                     "needs a header name",
		"%PROTOCOL(x)%":               "takes no argument",
		"%REQ(a?b?c)%":                "want %REQ(name)%",
		"%DOWNSTREAM_REMOTE_ADDRESS%": "not supported",
	} {
		if _, err := parseHeaderFormat(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one mentioning %q", in, err, want)
		}
	}
	// Over HTTP/2 and without use_remote_address.
	r.ProtoMajor, r.ProtoMinor = 2, 0
	r.Header.Set("X-Forwarded-For", "203.0.113.1, 198.51.100.2")
	rh = NewRouteHeaders(nil, r, ri, &ClientAddressing{})
	f, _ := parseHeaderFormat("%PROTOCOL% %DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%")
	if got := f.eval(rh); got != "HTTP/2 198.51.100.2" {
		t.Errorf("got %q, want the protocol as Envoy writes it and the last X-Forwarded-For address", got)
	}
}

// TestHeaderMutationSemantics checks one level's mutations against Envoy's
// HeaderParser::evaluateHeaders: removals first, conditions checked before any
// write of the level, overwrites before additions, empty values dropped.
func TestHeaderMutationSemantics(t *testing.T) {
	deprecated := func(name, value string, app bool) *corev3.HeaderValueOption {
		return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: name, Value: value}, Append: wrapperspb.Bool(app)}
	}
	keepEmpty := xdstest.HVO("x-keep", "%REQ(x-none)%", xdstest.OverwriteOrAdd)
	keepEmpty.KeepEmptyValue = true
	m, err := convertHeaderMutation("request", []*corev3.HeaderValueOption{
		xdstest.HVO("x-append", "two", xdstest.AppendOrAdd),
		xdstest.HVO("x-absent-present", "new", xdstest.IfAbsent),
		xdstest.HVO("x-absent-missing", "new", xdstest.IfAbsent),
		xdstest.HVO("x-exists-present", "new", xdstest.OverwriteExists),
		xdstest.HVO("x-exists-missing", "new", xdstest.OverwriteExists),
		xdstest.Set("x-set", "new"),
		xdstest.Set("x-removed", "added back"), // removal happens first
		xdstest.HVO("x-removed-2", "new", xdstest.IfAbsent),
		xdstest.Set("x-both", "set"),
		xdstest.HVO("x-both", "appended", xdstest.AppendOrAdd), // overwrites first, then additions
		xdstest.Set("x-empty", "%REQ(x-none)%"),                // dropped: empty
		keepEmpty,
		deprecated("x-dep-true", "two", true),
		deprecated("x-dep-false", "new", false),
		xdstest.HVO("x-default", "two", xdstest.AppendOrAdd),
	}, []string{"x-removed", "X-Removed-2"})
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{
		"X-Append": {"one"}, "X-Absent-Present": {"old"}, "X-Exists-Present": {"old"}, "X-Set": {"old1", "old2"},
		"X-Removed": {"old"}, "X-Removed-2": {"old"}, "X-Both": {"old"}, "X-Empty": {"old"}, "X-Dep-True": {"one"},
		"X-Dep-False": {"old"}, "X-Default": {"one"},
	}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	m.apply(h, NewRouteHeaders(nil, r, &RequestInfo{Header: r.Header}, &ClientAddressing{}))
	want := http.Header{
		"X-Append": {"one", "two"}, "X-Absent-Present": {"old"}, "X-Absent-Missing": {"new"}, "X-Exists-Present": {"new"},
		"X-Set": {"new"}, "X-Removed": {"added back"}, "X-Removed-2": {"new"}, "X-Both": {"set", "appended"},
		"X-Empty": {"old"}, "X-Keep": {""}, "X-Dep-True": {"one", "two"}, "X-Dep-False": {"new"}, "X-Default": {"one", "two"},
	}
	if diff := cmp.Diff(want, h); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}
}
