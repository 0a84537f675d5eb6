package nodeagent

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// probe keeps the container's readiness from its readiness probe (ready as soon as it
// runs when it has none), and restarts it when its liveness probe fails, until ctx ends
// (the process exited or the Pod is going away).
func (p *pod) probe(ctx context.Context, c *container) {
	if lp := c.spec.LivenessProbe; lp != nil {
		go p.runProbe(ctx, c, lp, func(ok bool, msg string) {
			if !ok {
				p.log.Info("liveness probe failed, restarting", "container", c.spec.Name, "msg", msg)
				c.stop(time.After(gracePeriod(p.spec)))
			}
		})
	}
	rp := c.spec.ReadinessProbe
	if rp == nil {
		if c.setReady(true) {
			p.changed()
		}
		return
	}
	p.runProbe(ctx, c, rp, func(ok bool, msg string) {
		if !ok {
			p.log.Debug("readiness probe failed", "container", c.spec.Name, "msg", msg)
		}
		if c.setReady(ok) {
			p.changed()
		}
	})
}

// runProbe calls report with each outcome that crosses the probe's thresholds.
func (p *pod) runProbe(ctx context.Context, c *container, pr *corev1.Probe, report func(ok bool, msg string)) {
	if !sleep(ctx, time.Duration(pr.InitialDelaySeconds)*time.Second) {
		return
	}
	period := seconds(pr.PeriodSeconds, 10)
	succ, fail := int(max(pr.SuccessThreshold, 1)), 3
	if pr.FailureThreshold > 0 {
		fail = int(pr.FailureThreshold)
	}
	okRun, failRun := 0, 0
	for {
		err := p.check(ctx, c, pr)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			okRun, failRun = okRun+1, 0
			if okRun == succ {
				report(true, "")
			}
		} else {
			okRun, failRun = 0, failRun+1
			if failRun == fail {
				report(false, err.Error())
			}
		}
		if !sleep(ctx, period) {
			return
		}
	}
}

func seconds(s int32, def int) time.Duration {
	if s <= 0 {
		return time.Duration(def) * time.Second
	}
	return time.Duration(s) * time.Second
}

// check runs the probe once: nil means success.
func (p *pod) check(ctx context.Context, c *container, pr *corev1.Probe) error {
	ctx, cancel := context.WithTimeout(ctx, seconds(pr.TimeoutSeconds, 1))
	defer cancel()
	switch {
	case pr.HTTPGet != nil:
		return p.checkHTTP(ctx, c, pr.HTTPGet)
	case pr.TCPSocket != nil:
		port, err := portNumber(c, pr.TCPSocket.Port)
		if err != nil {
			return err
		}
		host := pr.TCPSocket.Host
		if host == "" {
			host = p.net.PodIP
		}
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return err
		}
		return conn.Close()
	}
	return fmt.Errorf("only httpGet and tcpSocket probes are supported by the test node agent")
}

func (p *pod) checkHTTP(ctx context.Context, c *container, g *corev1.HTTPGetAction) error {
	port, err := portNumber(c, g.Port)
	if err != nil {
		return err
	}
	host := g.Host
	if host == "" {
		host = p.net.PodIP
	}
	scheme := "http"
	if g.Scheme == corev1.URISchemeHTTPS {
		scheme = "https"
	}
	u := url.URL{Scheme: scheme, Host: net.JoinHostPort(host, strconv.Itoa(port)), Path: g.Path}
	if u.Path == "" {
		u.Path = "/"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", "kube-probe/1.37")
	for _, h := range g.HTTPHeaders {
		if h.Name == "Host" {
			req.Host = h.Value
		}
		req.Header.Add(h.Name, h.Value)
	}
	client := &http.Client{
		// The kubelet neither verifies probe certificates nor follows redirects off-host.
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true},
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 10<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("HTTP probe failed with statuscode: %d", resp.StatusCode)
	}
	return nil
}

// portNumber resolves a probe's port, by number or by the name of a container port.
func portNumber(c *container, port intstr.IntOrString) (int, error) {
	if port.Type == intstr.Int {
		return port.IntValue(), nil
	}
	for _, cp := range c.spec.Ports {
		if cp.Name == port.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	if n, err := strconv.Atoi(port.StrVal); err == nil {
		return n, nil
	}
	return 0, fmt.Errorf("probe port %q: no container port of that name", port.StrVal)
}
