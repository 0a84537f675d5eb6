package e2e

import (
	"crypto/tls"
	"net"
	"time"
)

func tlsDial(addr, serverName string) (*tls.Conn, error) {
	d := &net.Dialer{Timeout: 2 * time.Second}
	return tls.DialWithDialer(d, "tcp", addr, &tls.Config{ServerName: serverName, InsecureSkipVerify: true}) // self-signed test certificates
}
