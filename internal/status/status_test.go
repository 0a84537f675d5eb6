package status

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/portico-dev/portico/internal/dag"
)

// TestHandler: /statuses answers what `portico check -o json` prints, filtered by
// ?status=, 503 before a first build and 400 for a status that does not exist.
func TestHandler(t *testing.T) {
	var latest []*dag.Status
	built := false
	h := Handler(func() ([]*dag.Status, bool) { return latest, built })
	get := func(target string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
		return rec
	}
	if rec := get("/statuses"); rec.Code != http.StatusServiceUnavailable {
		t.Errorf("before a build: %d, want 503", rec.Code)
	}

	latest, built = []*dag.Status{
		ingressStatus("a", dag.StatusValid, "valid Ingress"),
		ingressStatus("b", dag.StatusInvalid, "bad path"),
		ingressStatus("c", dag.StatusOrphaned, "nobody"),
	}, true
	var check bytes.Buffer
	if err := WriteJSON(&check, latest); err != nil {
		t.Fatal(err)
	}
	rec := get("/statuses")
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" || rec.Body.String() != check.String() {
		t.Errorf("GET /statuses: %d %s\n%s\nwant what check -o json prints:\n%s", rec.Code, rec.Header().Get("Content-Type"), rec.Body, check.String())
	}
	rec = get("/statuses?status=invalid,orphaned")
	var got []Entry
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Entries(latest[1:]), got); diff != "" {
		t.Errorf("?status=invalid,orphaned (-want +got):\n%s", diff)
	}
	if rec := get("/statuses?status=broken"); rec.Code != http.StatusBadRequest || !bytes.Contains(rec.Body.Bytes(), []byte("valid, invalid, orphaned or ignored")) {
		t.Errorf("?status=broken: %d %q, want 400 naming the values", rec.Code, rec.Body)
	}
}
