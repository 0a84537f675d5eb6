package dag

import (
	"strconv"
	"time"

	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
)

// SlowStart ramps up the share of the traffic an endpoint gets after it joins its
// cluster (HTTPProxy slowStartPolicy): its weight grows from MinWeightPercent to full
// over Window, faster at first with a higher Aggression.
type SlowStart struct {
	Window           time.Duration
	Aggression       float64
	MinWeightPercent float64
}

// proxySlowStart checks a service's slowStartPolicy; nil without one, or when invalid
// (the problem recorded). It needs a load balancer that weighs endpoints: round robin
// or WeightedLeastRequest.
func proxySlowStart(p *contourv1.SlowStartPolicy, lb LoadBalancer, at lazyField, c *proxyCheck) *SlowStart {
	if p == nil {
		return nil
	}
	field := at.String() + ".slowStartPolicy"
	out := &SlowStart{Aggression: 1, MinWeightPercent: float64(p.MinimumWeightPercent)}
	if p.MinimumWeightPercent == 0 {
		out.MinWeightPercent = 10 // Envoy's default
	}
	ok := true
	if d, err := time.ParseDuration(p.Window); err != nil || d <= 0 {
		c.fail(problemService, "SlowStartInvalid", "%s.window %q must be a positive duration such as 30s or 5m", field, p.Window)
		ok = false
	} else {
		out.Window = d
	}
	if p.Aggression != "" {
		a, err := strconv.ParseFloat(p.Aggression, 64)
		if err != nil || a <= 0 || a > 1e6 {
			c.fail(problemService, "SlowStartInvalid", "%s.aggression %q must be a positive number such as \"1.0\" (linear) or \"2\"", field, p.Aggression)
			ok = false
		}
		out.Aggression = a
	}
	if p.MinimumWeightPercent > 100 {
		c.fail(problemService, "SlowStartInvalid", "%s.minWeightPercent %d must be 0-100", field, p.MinimumWeightPercent)
		ok = false
	}
	switch lb {
	case "", LBRoundRobin, LBWeightedLeastRequest:
	default:
		c.fail(problemService, "SlowStartInvalid", "%s needs the RoundRobin or WeightedLeastRequest load balancer strategy (the route's is %s)", field, lb)
		ok = false
	}
	if !ok {
		return nil
	}
	return out
}
