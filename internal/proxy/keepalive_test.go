package proxy

import (
	"bufio"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
)

// TestAcceptedConnectionsCarryNoTCPKeepAlive: as Envoy's listeners, the
// proxy's set no TCP keep-alive on the connections they accept (Go's default
// would probe after 15 s, set with four system calls per connection). The
// kernel shows a keep-alive socket's timer in /proc/net/tcp: "tr" 2 while
// the connection idles, 0 without one.
func TestAcceptedConnectionsCarryNoTCPKeepAlive(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/net/tcp")
	}
	p := startConnLimitsProxy(t, func(*hcmv3.HttpConnectionManager) {})
	conn, err := net.Dial("tcp", p.ListenerAddr("ingress_http"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if resp, body := rawRequest(t, conn, bufio.NewReader(conn), "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); resp.StatusCode != 200 {
		t.Fatalf("status %d, body %q", resp.StatusCode, body)
	}
	// The server's side of conn: local address conn's remote, remote conn's local.
	server := socketTimer(t, conn.RemoteAddr().(*net.TCPAddr), conn.LocalAddr().(*net.TCPAddr))
	for i := 0; server == "01" && i < 500; i++ {
		// A retransmission timer runs until the client's ACK of the
		// response is in: look again.
		time.Sleep(10 * time.Millisecond)
		server = socketTimer(t, conn.RemoteAddr().(*net.TCPAddr), conn.LocalAddr().(*net.TCPAddr))
	}
	if server != "00" {
		t.Fatalf("accepted connection's timer is %q, want 00 (none): TCP keep-alive is on", server)
	}
	// The check can fail: the client's own side, dialled with Go's default,
	// carries the keep-alive timer.
	if client := socketTimer(t, conn.LocalAddr().(*net.TCPAddr), conn.RemoteAddr().(*net.TCPAddr)); client != "02" {
		t.Fatalf("dialled connection's timer is %q, want 02 (keep-alive)", client)
	}
}

// socketTimer returns the "tr" field of the IPv4 socket local→remote in
// /proc/net/tcp: which timer the kernel runs for it, in hex.
func socketTimer(t *testing.T, local, remote *net.TCPAddr) string {
	t.Helper()
	data, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	want := procAddr(local) + " " + procAddr(remote)
	for _, line := range strings.Split(string(data), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 6 || f[1]+" "+f[2] != want {
			continue
		}
		tr, _, _ := strings.Cut(f[5], ":") // tr:tm->when
		return tr
	}
	t.Fatalf("no socket %s in /proc/net/tcp", want)
	return ""
}

// procAddr writes an IPv4 address and port as /proc/net/tcp does: the
// address's four bytes as a little-endian word, the port big-endian, in hex.
func procAddr(a *net.TCPAddr) string {
	ip := a.IP.To4()
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 3; i >= 0; i-- {
		b.WriteByte(hex[ip[i]>>4])
		b.WriteByte(hex[ip[i]&15])
	}
	b.WriteByte(':')
	for _, shift := range []uint{12, 8, 4, 0} {
		b.WriteByte(hex[(a.Port>>shift)&15])
	}
	return b.String()
}
