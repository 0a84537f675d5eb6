// Command cpushare divides a CPU profile of the embedded proxy (bench/proxy's
// -cpuprofile) into the jobs of a forwarded request, each sample counted once,
// in the first category whose rule its stack matches:
//
//	go run ./bench/proxy/cpushare /tmp/c32.pprof
//
// It answers "what stands between Portico and nginx" in the same terms run
// after run: kernel time by the system call it serves, the garbage collector,
// the scheduler, net/http's parsing and writing, the upstream client, the
// access log, contexts and timers, and Portico's own handler.
package main

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/google/pprof/profile"
)

// category is a job of the request path. A sample belongs to it when its
// stack matches stack and, if leaf is set, one of its innermost frames
// matches leaf (a system call, say).
type category struct {
	name        string
	stack, leaf *regexp.Regexp
	unless      *regexp.Regexp // a stack that also matches this is not the category's
}

// leafDepth is how many innermost frames a leaf rule looks at.
const leafDepth = 3

func rule(name, stack, leaf string) category {
	c := category{name: name, stack: regexp.MustCompile(stack)}
	if leaf != "" {
		c.leaf = regexp.MustCompile(leaf)
	}
	return c
}

// ruleUnless is rule for stacks that do not match unless.
func ruleUnless(name, stack, unless string) category {
	c := rule(name, stack, "")
	c.unless = regexp.MustCompile(unless)
	return c
}

// The bare sides' writes (bench/proxy/bare: fasthttp, raw), told apart by the
// function that flushes: the server loop for the client, the exchange for the upstream.
const (
	bareClientWrite   = `Flush\n(main\.\(\*rawProxy\)\.serveConn|github\.com/valyala/fasthttp\.\(\*Server\)\.serveConn)`
	bareUpstreamWrite = `Flush\n(main\.\(\*rawConn\)\.writeRequest|github\.com/valyala/fasthttp\.\(\*transport\)\.RoundTrip)`
	// Portico's codec flushes its answers from the connection's loop or a
	// handler's Flush.
	codecClientWrite = `Flush\n[^\n]*portico/internal/proxy/http1\.`
	// The codec's own work: what its connection loop does outside the handler.
	codecServer  = `portico/internal/proxy/http1\.`
	codecHandler = `listener\.\(\*listenerHTTP\)\.ServeHTTP`
)

const syscallFrames = `linux\.Syscall6|syscall\.Syscall|futex|usleep|osyield|EpollWait`

// categories are tried in order: the kernel's share first (by what called
// into it), then the runtime's, then the request path's layers from the
// codec up.
var categories = []category{
	rule("kernel: write to the client", `finishRequest|chunkWriter|checkConnErrorWriter|http2.*writeFrame|`+bareClientWrite+`|`+codecClientWrite, syscallFrames),
	rule("kernel: write to the upstream", `http1Conn\)\.exchange|Request\)\.write|persistConn\)\.writeLoop|`+bareUpstreamWrite, syscallFrames),
	rule("kernel: reads (both sides)", `syscall\.read|netFD\)\.Read`, syscallFrames),
	rule("kernel: access log write", `accesslog`, syscallFrames),
	rule("kernel: other (poller, futex, sleep)", ``, syscallFrames),
	rule("GC background (mark, sweep)", `gcBgMarkWorker|bgsweep|bgscavenge`, ""),
	rule("allocation and GC assists", `mallocgc|gcAssist|newobject|makeslice|growslice|newarray|wbBuf`, ""),
	rule("scheduler (park, schedule, netpoll)", `runtime\.mcall|runtime\.schedule|findRunnable|netpoll|park_m|goready`, ""),
	rule("TLS (crypto, records)", `crypto/`, ""),
	rule("access log (format, queue)", `accesslog|log/slog`, ""),
	rule("fasthttp: HostClient (write request, read response)", `valyala/fasthttp\.\(\*(HostClient|transport)\)`, ""),
	rule("fasthttp: server (parse request, write response)", `valyala/fasthttp\.`, ""),
	rule("raw codec (parse, copy, write)", `main\.\(\*(rawProxy|rawConn|head)\)`, ""),
	ruleUnless("codec: read, parse, answer (outside the handler)", codecServer, codecHandler),
	rule("codec: response head and body (handler's writes)", `portico/internal/proxy/http1\.\(\*response\)`, ""),
	rule("net/http: read and parse the request", `\(\*conn\)\.readRequest|readRequestLimit`, ""),
	rule("net/http: response headers and flush", `finishRequest|chunkWriter|\(\*response\)\.`, ""),
	rule("net/http: background read, conn state", `backgroundRead|connReader|setState`, ""),
	rule("net/http: HTTP/2 frames and streams", `net/http/internal/http2|x/net/http2`, ""),
	rule("upstream client: write request, parse response", `HTTP1Client|http1Conn|ReadResponse|persistConn`, ""),
	rule("contexts, timers, deadlines", `context\.|time\.AfterFunc|startTimeouts|setDeadline|timer`, ""),
	rule("ReverseProxy (header and body copies)", `httputil\.\(\*ReverseProxy\)`, ""),
	rule("Portico's handler (routing, headers, filters, metrics)", `portico/internal/proxy`, ""),
	rule("net/http: other", `net/http`, ""),
	rule("other", ``, ""),
}

func main() {
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: cpushare PROFILE [REQUESTS]\n\nREQUESTS, the requests served while profiling, adds microseconds per request.")
	}
	flag.Parse()
	if flag.NArg() < 1 {
		flag.Usage()
		os.Exit(2)
	}
	p, err := readProfile(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "cpushare:", err)
		os.Exit(1)
	}
	var requests float64
	if flag.NArg() > 1 {
		fmt.Sscan(flag.Arg(1), &requests)
	}
	shares, total := divide(p)
	report(shares, total, requests)
}

func readProfile(path string) (*profile.Profile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return profile.Parse(f)
}

// divide sums the CPU time of p's samples by category.
func divide(p *profile.Profile) (map[string]time.Duration, time.Duration) {
	cpu := cpuIndex(p)
	shares := map[string]time.Duration{}
	var total time.Duration
	for _, s := range p.Sample {
		d := time.Duration(s.Value[cpu])
		total += d
		frames := functionNames(s)
		whole := strings.Join(frames, "\n")
		leaf := strings.Join(frames[:min(leafDepth, len(frames))], "\n")
		for _, c := range categories {
			if c.leaf != nil && !c.leaf.MatchString(leaf) {
				continue
			}
			if c.stack.MatchString(whole) && (c.unless == nil || !c.unless.MatchString(whole)) {
				shares[c.name] += d
				break
			}
		}
	}
	return shares, total
}

// cpuIndex is the index of the CPU time among a sample's values.
func cpuIndex(p *profile.Profile) int {
	for i, st := range p.SampleType {
		if st.Type == "cpu" {
			return i
		}
	}
	return len(p.SampleType) - 1
}

// functionNames are a sample's frames, innermost first, inlined calls included.
func functionNames(s *profile.Sample) []string {
	var names []string
	for _, loc := range s.Location {
		for _, l := range loc.Line {
			if l.Function != nil {
				names = append(names, l.Function.Name)
			}
		}
	}
	return names
}

func report(shares map[string]time.Duration, total time.Duration, requests float64) {
	fmt.Printf("%-55s %8s %6s", "category", "CPU", "share")
	if requests > 0 {
		fmt.Printf(" %8s", "µs/req")
	}
	fmt.Println()
	for _, c := range categories {
		d, ok := shares[c.name]
		if !ok {
			continue
		}
		fmt.Printf("%-55s %8s %5.1f%%", c.name, d.Round(time.Millisecond), 100*float64(d)/float64(total))
		if requests > 0 {
			fmt.Printf(" %8.2f", d.Seconds()/requests*1e6)
		}
		fmt.Println()
	}
	fmt.Printf("%-55s %8s\n", "total", total.Round(time.Millisecond))
}
