package e2e

import (
	"fmt"
	"strings"
	"testing"
)

// TestManyFilesOneEdit: among many manifest files, editing one, adding one and removing
// one each reach the data plane, and every other host keeps answering from the backend
// it had: the reload that reads only the changed file applies exactly that change, and
// the data plane is sent the host it changed.
func TestManyFilesOneEdit(t *testing.T) {
	const n = 60
	files := map[string]string{"backends.yaml": backends(t, "blue", "green")}
	for i := range n {
		name := fmt.Sprintf("app-%02d", i)
		files["apps/"+name+".yaml"] = ingressManifest(name, name+".test", []pathRule{{"Prefix", "/", "blue"}}, "")
	}
	e := start(t, files)
	answersAll := func(skip string) {
		t.Helper()
		for i := range n {
			name := fmt.Sprintf("app-%02d", i)
			if name == skip {
				continue
			}
			if r := e.get(name+".test", "/"); r.service() != "blue" {
				t.Errorf("%s.test: %d from %q, want blue", name, r.status, r.service())
			}
		}
	}
	answersAll("")

	// The edit reaches the embedded proxy as that one host (VHDS): the route
	// configuration holding every plain-HTTP host is not sent again.
	updates := func(typ string) float64 {
		v, _ := metricSample(e.adminMetrics(), "portico_proxy_xds_updates_total", map[string]string{"type": typ, "result": "ack"})
		return v
	}
	routesBefore, hostsBefore := updates("RouteConfiguration"), updates("VirtualHost")
	e.write("apps/app-17.yaml", ingressManifest("app-17", "app-17.test", []pathRule{{"Prefix", "/", "green"}, {"Prefix", "/new", "blue"}}, ""))
	e.waitFor("app-17.test", "/", "green", 200)
	if routes, hosts := updates("RouteConfiguration"), updates("VirtualHost"); routes != routesBefore || hosts <= hostsBefore {
		t.Errorf("one host edited: %v route configuration and %v VirtualHost updates, want none and at least one", routes-routesBefore, hosts-hostsBefore)
	}
	if r := e.get("app-17.test", "/new"); r.service() != "blue" {
		t.Errorf("app-17.test/new: %d from %q, want blue", r.status, r.service())
	}
	answersAll("app-17")

	e.write("apps/added.yaml", ingressManifest("added", "added.test", []pathRule{{"Prefix", "/", "green"}}, ""))
	e.waitFor("added.test", "/", "green", 200)

	e.remove("apps/app-42.yaml")
	e.waitFor("app-42.test", "/", "", 404)
	if r := e.get("app-17.test", "/"); r.service() != "green" {
		t.Errorf("app-17.test after another file's removal: %d from %q", r.status, r.service())
	}

	// A file renamed with its content unchanged keeps serving throughout.
	e.write("apps/app-05-renamed.yaml", strings.TrimSpace(files["apps/app-05.yaml"])+"\n")
	e.remove("apps/app-05.yaml")
	e.write("apps/marker.yaml", ingressManifest("marker", "marker.test", []pathRule{{"Prefix", "/", "green"}}, ""))
	e.waitFor("marker.test", "/", "green", 200)
	if r := e.get("app-05.test", "/"); r.service() != "blue" {
		t.Errorf("app-05.test after its file was renamed: %d from %q", r.status, r.service())
	}
}
