package kubetest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Config is how to reach and authenticate to the API server. Its fields are named as
// in client-go's rest.Config (TLSClientConfig.CAData and CAFile there).
type Config struct {
	Host        string // https://127.0.0.1:<port>
	BearerToken string
	CAData      []byte // PEM of the CA that signed the serving certificate
	CAFile      string // the same, as a file

	once   sync.Once
	client *http.Client
}

// HTTPClient returns a client that trusts the CA and sends the bearer token. It is
// made once per Config (set the fields before the first call).
func (c *Config) HTTPClient() *http.Client {
	c.once.Do(func() { c.client = c.newHTTPClient() })
	return c.client
}

func (c *Config) newHTTPClient() *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.CAData)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: &bearer{token: c.BearerToken, next: tr}, Timeout: time.Minute}
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b *bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	if b.token == "" {
		return b.next.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(req)
}

// Do sends one request to path (e.g. /api/v1/namespaces) with in, when not nil,
// encoded as JSON, and decodes a successful response into out, when not nil. A
// response other than 2xx is returned as an *APIError. It is a stand-in for client-go,
// which the main module does not depend on; PATCH bodies are sent as merge patches.
func (c *Config) Do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.Host, "/")+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	if in != nil {
		ct := "application/json"
		if method == http.MethodPatch {
			ct = "application/merge-patch+json"
		}
		req.Header.Set("Content-Type", ct)
	}
	resp, err := c.HTTPClient().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		e := &APIError{Code: resp.StatusCode, Method: method, Path: path}
		if json.Unmarshal(data, &e.Status) != nil || e.Status.Message == "" {
			e.Status.Message = strings.TrimSpace(string(data))
		}
		return e
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// APIError is a response other than 2xx from Config.Do.
type APIError struct {
	Code   int
	Method string
	Path   string
	Status metav1.Status // as sent by the API server when it sent one
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.Path, e.Code, e.Status.Reason, e.Status.Message)
}

// StatusCode returns the HTTP status of err when it is (or wraps) an *APIError, else 0.
func StatusCode(err error) int {
	var e *APIError
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}
