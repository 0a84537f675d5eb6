package dag

import "strings"

// Cycles of delegations or includes. The object blamed for a cycle must not depend on
// where a root's walk enters it: otherwise whoever adds a root could choose which object
// of another team's tree is rejected. So a cycle is judged on the objects alone: its
// newest member (by creation time, then namespace/name) is the one that closed it, as
// the last object to join a cycle is what made it one; it is invalid, the older members
// are not. Breaking that member may leave other cycles (two loops sharing objects), so
// the search repeats until none is left.

// cycleGraph is what breakCycles needs to know of the objects.
type cycleGraph[N comparable] struct {
	nodes []N
	// edges are the objects n delegates or includes to, in a way that can take part in
	// a cycle (roots, other classes and unusable objects are left out by the caller).
	edges func(n N) []N
	// newer reports whether a joined the graph after b.
	newer func(a, b N) bool
	name  func(n N) string
}

// breakCycles returns the objects to reject, each with the cycle it closes, rendered
// "A -> B -> A".
func breakCycles[N comparable](g cycleGraph[N]) map[N]string {
	out := map[N]string{}
	removed := map[N]bool{}
	for {
		found := false
		for _, scc := range stronglyConnected(g, removed) {
			if len(scc) == 1 && !contains(g.edges(scc[0]), scc[0]) {
				continue
			}
			blamed := scc[0]
			for _, n := range scc[1:] {
				if g.newer(n, blamed) {
					blamed = n
				}
			}
			out[blamed] = describeCycle(g, blamed, scc)
			removed[blamed] = true
			found = true
		}
		if !found {
			return out
		}
	}
}

func contains[N comparable](s []N, n N) bool {
	for _, x := range s {
		if x == n {
			return true
		}
	}
	return false
}

// describeCycle renders a shortest cycle from n back to n within its component.
func describeCycle[N comparable](g cycleGraph[N], n N, scc []N) string {
	in := map[N]bool{}
	for _, m := range scc {
		in[m] = true
	}
	parent := map[N]N{}
	seen := map[N]bool{}
	queue := []N{n}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, t := range g.edges(cur) {
			if !in[t] {
				continue
			}
			if t == n {
				path := []string{g.name(n)}
				for c := cur; c != n; c = parent[c] {
					path = append(path, g.name(c))
				}
				path = append(path, g.name(n))
				// path is n, back..., n: reverse the middle to read forwards.
				for i, j := 1, len(path)-2; i < j; i, j = i+1, j-1 {
					path[i], path[j] = path[j], path[i]
				}
				return strings.Join(path, " -> ")
			}
			if !seen[t] {
				seen[t] = true
				parent[t] = cur
				queue = append(queue, t)
			}
		}
	}
	return g.name(n)
}

// stronglyConnected returns the strongly connected components of the graph without the
// removed nodes (Tarjan's algorithm), in a deterministic order.
func stronglyConnected[N comparable](g cycleGraph[N], removed map[N]bool) [][]N {
	index := map[N]int{}
	low := map[N]int{}
	onStack := map[N]bool{}
	var stack []N
	var out [][]N
	next := 0
	var connect func(n N)
	connect = func(n N) {
		index[n], low[n] = next, next
		next++
		stack = append(stack, n)
		onStack[n] = true
		for _, t := range g.edges(n) {
			if removed[t] {
				continue
			}
			if _, seen := index[t]; !seen {
				connect(t)
				low[n] = min(low[n], low[t])
			} else if onStack[t] {
				low[n] = min(low[n], index[t])
			}
		}
		if low[n] == index[n] {
			var scc []N
			for {
				top := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[top] = false
				scc = append(scc, top)
				if top == n {
					break
				}
			}
			out = append(out, scc)
		}
	}
	for _, n := range g.nodes {
		if _, seen := index[n]; !seen && !removed[n] {
			connect(n)
		}
	}
	return out
}
