package nodeagent

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/portico-dev/portico/internal/testutil"
)

// logServer is the part of the kubelet's API that `kubectl logs` reaches through the
// API server: GET /containerLogs/{namespace}/{pod}/{container}, with tailLines and
// limitBytes (follow, since and timestamps are not supported: the whole log is
// returned). The API server does not verify the certificate (it has no kubelet CA).
type logServer struct {
	srv  *http.Server
	port int
}

func startLogServer(a *Agent) (*logServer, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(NodeIP, "0"))
	if err != nil {
		return nil, err
	}
	c := testutil.SelfSigned(a.opts.NodeName)
	cert, err := tls.X509KeyPair(c.CertPEM, c.KeyPEM)
	if err != nil {
		l.Close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", func(w http.ResponseWriter, r *http.Request) {
		data, err := a.Logs(r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container"))
		if err != nil {
			status := http.StatusNotFound
			if !errors.Is(err, os.ErrNotExist) && !apierrors.IsNotFound(err) {
				status = http.StatusBadRequest
			}
			http.Error(w, err.Error(), status)
			return
		}
		q := r.URL.Query()
		if n, err := strconv.Atoi(q.Get("tailLines")); err == nil && n >= 0 {
			data = tail(data, n)
		}
		if n, err := strconv.Atoi(q.Get("limitBytes")); err == nil && n >= 0 && n < len(data) {
			data = data[:n]
		}
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write(data)
	})
	s := &logServer{
		srv: &http.Server{
			Handler:           mux,
			TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}},
			ReadHeaderTimeout: 10 * time.Second,
		},
		port: l.Addr().(*net.TCPAddr).Port,
	}
	go func() { _ = s.srv.ServeTLS(l, "", "") }()
	return s, nil
}

// tail returns the last n lines of data.
func tail(data []byte, n int) []byte {
	if n == 0 {
		return nil
	}
	end := len(data)
	if end > 0 && data[end-1] == '\n' {
		end--
	}
	for i := end - 1; i >= 0; i-- {
		if data[i] == '\n' {
			if n--; n == 0 {
				return data[i+1:]
			}
		}
	}
	return data
}

func (s *logServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
}
