package app

import (
	"fmt"
	"net"
	"strconv"
)

// checkListenAddr refuses an address that no listener could ever bind, before anything
// starts, so that a typo in a flag ends the process with the flag's name instead of a
// data plane that retries it or a translator error blamed on the configuration.
func checkListenAddr(flag, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--%s %q: want HOST:PORT, such as 127.0.0.1:8080 or :8080 (%v)", flag, addr, err)
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || (p == 0 && port != "0") {
		return fmt.Errorf("--%s %q: the port must be a number from 0 to 65535", flag, addr)
	}
	if host != "" && net.ParseIP(host) == nil {
		if _, err := net.LookupHost(host); err != nil {
			return fmt.Errorf("--%s %q: cannot resolve %q: %v", flag, addr, host, err)
		}
	}
	return nil
}

// checkListenAddrs checks each flag → address pair, in the order given.
func checkListenAddrs(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if err := checkListenAddr(pairs[i], pairs[i+1]); err != nil {
			return err
		}
	}
	return nil
}
