package proxy

import "context"

// protectedAddrs lists what the proxy itself serves, its xDS server (never
// a backend: through an h2c route it would hand out every certificate's key)
// and what Config says the process serves, for the egress guard.
func (p *Proxy) protectedAddrs() []string {
	addrs := []string{p.cfg.XDSAddress}
	if p.cfg.ProtectedAddrs != nil {
		addrs = append(addrs, p.cfg.ProtectedAddrs()...)
	}
	return append(addrs, p.listeners.Addrs()...)
}

// refreshEgress brings the egress guard's protected addresses up to date
// when the listeners changed since the last time (or it never ran).
func (p *Proxy) refreshEgress(ctx context.Context) {
	if p.egressStale.Swap(false) {
		p.egress.Refresh(ctx, p.protectedAddrs)
	}
}
