// Command podinfo is the test image of the node agent's tests: it shows a container what
// it was given. GET / answers JSON with its environment, arguments and the files under
// each directory named by -files; GET /status/{code} answers that status (for probes);
// GET /exit/{code} exits with that code (for restarts). It logs each request, and
// "SIGTERM" when asked to stop, on which it exits 0.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

func main() {
	addr := flag.String("addr", ":8080", "listen address")
	files := flag.String("files", "", "comma-separated directories whose files / shows")
	flag.Parse()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"env":   environ(),
			"args":  os.Args[1:],
			"files": readFiles(*files),
		})
	})
	mux.HandleFunc("GET /status/{code}", func(w http.ResponseWriter, r *http.Request) {
		code, err := strconv.Atoi(r.PathValue("code"))
		if err != nil {
			code = http.StatusBadRequest
		}
		w.WriteHeader(code)
	})
	mux.HandleFunc("GET /exit/{code}", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.PathValue("code"))
		fmt.Println("exiting with", code)
		os.Exit(code)
	})
	logged := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println(r.Method, r.URL.Path)
		mux.ServeHTTP(w, r)
	})
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	go func() {
		<-sig
		fmt.Println("SIGTERM")
		os.Exit(0)
	}()
	fmt.Println("listening on", *addr)
	if err := http.ListenAndServe(*addr, logged); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func environ() map[string]string {
	env := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return env
}

func readFiles(dirs string) map[string]string {
	out := map[string]string{}
	for _, dir := range strings.Split(dirs, ",") {
		if dir == "" {
			continue
		}
		_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				out[path] = "error: " + err.Error()
				return nil
			}
			if d.Type().IsRegular() {
				data, err := os.ReadFile(path)
				if err != nil {
					out[path] = "error: " + err.Error()
				} else {
					out[path] = string(data)
				}
			}
			return nil
		})
	}
	return out
}
