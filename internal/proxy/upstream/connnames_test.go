package upstream

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// A namesConn notes the Connection names of the final response head, however
// the reads split it, after any interim heads; a head past maxNoted is not
// noted; without await, nothing is.
func TestNamesConnNotesTheFinalHead(t *testing.T) {
	for _, c := range []struct {
		name  string
		reads []string
		want  []string
	}{
		{"one read", []string{"HTTP/1.1 200 OK\r\nConnection: close, X-A\r\nX-A: 1\r\nContent-Length: 2\r\n\r\nok"}, []string{"X-A"}},
		{"split everywhere", strings.Split("HTTP/1.1 200 OK\r\nconnection: X-A,  x-b ,close\r\n\r\n", ""), []string{"X-A", "x-b"}},
		{"two fields", []string{"HTTP/1.1 200 OK\r\nConnection: close\r\nConnection: X-A\r\n\r\n"}, []string{"X-A"}},
		{"interim heads first", []string{"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nConnection: X-Hint\r\n\r\n", "HTTP/1.1 200 OK\r\nConnection: close, X-A\r\n\r\n"}, []string{"X-A"}},
		{"bare LF", []string{"HTTP/1.1 200 OK\nConnection: close, X-A\n\n"}, []string{"X-A"}},
		{"a body that looks like a head", []string{"HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n", "HTTP/1.1 200 OK\r\nConnection: X-B\r\n\r\n"}, nil},
		{"no Connection", []string{"HTTP/1.1 204 No Content\r\n\r\n"}, nil},
		{"over the bound", []string{"HTTP/1.1 200 OK\r\nConnection: close, X-A\r\nX-Big: " + strings.Repeat("b", maxNoted) + "\r\n\r\n"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var names connNames
			nc := &namesConn{}
			nc.await(&names)
			for _, r := range c.reads {
				nc.note([]byte(r))
			}
			if !reflect.DeepEqual(names.names, c.want) {
				t.Errorf("noted %q, want %q", names.names, c.want)
			}
		})
	}
	t.Run("not awaited", func(t *testing.T) {
		nc := &namesConn{}
		nc.note([]byte("HTTP/1.1 200 OK\r\nConnection: close, X-A\r\n\r\n"))
		if len(nc.head) != 0 {
			t.Errorf("kept %d bytes", len(nc.head))
		}
	})
}

// removeFrom deletes the noted fields only where net/http dropped the
// Connection field, and never from a 101 (the upgrade's own).
func TestConnNamesRemoveFrom(t *testing.T) {
	names := connNames{names: []string{"x-a"}}
	res := func(status int, h http.Header) *http.Response {
		return &http.Response{StatusCode: status, ProtoMajor: 1, Header: h}
	}
	dropped := res(200, http.Header{"X-A": {"1"}, "X-B": {"2"}})
	names.removeFrom(dropped)
	if _, ok := dropped.Header["X-A"]; ok || dropped.Header.Get("X-B") != "2" {
		t.Errorf("after a dropped Connection: %v, want X-B only", dropped.Header)
	}
	for _, r := range []*http.Response{
		res(200, http.Header{"Connection": {"X-A"}, "X-A": {"1"}}),
		res(101, http.Header{"X-A": {"1"}}),
	} {
		names.removeFrom(r)
		if r.Header.Get("X-A") != "1" {
			t.Errorf("status %d with %v: X-A removed", r.StatusCode, r.Header)
		}
	}
}
