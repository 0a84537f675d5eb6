package proxy

import "github.com/portico-dev/portico/internal/proxy/upstream"

// clusterNamed is the named cluster of s, nil when it has none.
func (s *snapshot) clusterNamed(name string) *upstream.Cluster {
	uc, _ := s.clusters.Get(name)
	return uc
}
