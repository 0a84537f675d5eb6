package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

// LoadBalancerSubnet is where Services of type LoadBalancer get their addresses: one
// /32 per Service on the host's loopback interface, 10.253.0.1 to 10.253.0.254.
const LoadBalancerSubnet = "10.253.0.0/24"

// loadBalancers stand in for a cloud's load balancers (and the node's kube-proxy): a
// Service of type LoadBalancer gets an address of LoadBalancerSubnet in its
// status.loadBalancer, and each of its TCP ports there is forwarded to the Service's
// ready endpoints, round robin, as its EndpointSlices list them. Test processes on the
// host reach the Service at that address, as clients reach a cloud load balancer.
type loadBalancers struct {
	client kubernetes.Interface
	log    *slog.Logger
	slices discoverylisters.EndpointSliceLister

	mu     sync.Mutex
	byKey  map[string]*serviceLB // namespace/name
	used   [255]bool             // last octets handed out
	closed bool
}

// serviceLB is one Service's load balancer.
type serviceLB struct {
	ip        string
	namespace string
	name      string
	ports     map[int32]*portForwarder // by Service port
}

type portForwarder struct {
	ln   net.Listener
	port corev1.ServicePort
	next atomic.Uint64
	done chan struct{}
}

func startLoadBalancers(ctx context.Context, client kubernetes.Interface, log *slog.Logger) (*loadBalancers, error) {
	lbs := &loadBalancers{client: client, log: log, byKey: map[string]*serviceLB{}}
	factory := informers.NewSharedInformerFactory(client, 0)
	svcs := factory.Core().V1().Services()
	lbs.slices = factory.Discovery().V1().EndpointSlices().Lister()
	factory.Discovery().V1().EndpointSlices().Informer()
	if _, err := svcs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { lbs.sync(ctx, obj, false) },
		UpdateFunc: func(_, obj any) { lbs.sync(ctx, obj, false) },
		DeleteFunc: func(obj any) { lbs.sync(ctx, obj, true) },
	}); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return lbs, ctx.Err()
}

// sync gives the Service in obj its load balancer, or removes it when the Service is
// gone or no longer of type LoadBalancer.
func (l *loadBalancers) sync(ctx context.Context, obj any, deleted bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return
	}
	key := svc.Namespace + "/" + svc.Name
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	lb := l.byKey[key]
	if deleted || svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		if lb != nil {
			l.remove(ctx, key, lb)
		}
		return
	}
	if lb == nil {
		var err error
		if lb, err = l.add(ctx, svc); err != nil {
			l.log.Error("load balancer: cannot give the Service an address", "service", key, "err", err)
			return
		}
		l.byKey[key] = lb
		l.log.Info("load balancer added", "service", key, "ip", lb.ip)
	}
	l.syncPorts(svc, lb)
	if len(svc.Status.LoadBalancer.Ingress) != 1 || svc.Status.LoadBalancer.Ingress[0].IP != lb.ip {
		cur := svc.DeepCopy()
		cur.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: lb.ip}}
		if _, err := l.client.CoreV1().Services(svc.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
			// The next update of the Service (or this resync) tries again.
			l.log.Warn("load balancer: cannot write the Service's address", "service", key, "err", err)
		}
	}
}

func (l *loadBalancers) add(ctx context.Context, svc *corev1.Service) (*serviceLB, error) {
	octet := 0
	for i := 1; i < len(l.used); i++ {
		if !l.used[i] {
			octet = i
			break
		}
	}
	if octet == 0 {
		return nil, errors.New("no address left in " + LoadBalancerSubnet)
	}
	ip := "10.253.0." + strconv.Itoa(octet)
	if err := ipCmd(ctx, "addr", "replace", ip+"/32", "dev", "lo"); err != nil {
		return nil, err
	}
	l.used[octet] = true
	return &serviceLB{ip: ip, namespace: svc.Namespace, name: svc.Name, ports: map[int32]*portForwarder{}}, nil
}

// syncPorts opens a forwarder per TCP port of svc and closes those of ports it lost.
func (l *loadBalancers) syncPorts(svc *corev1.Service, lb *serviceLB) {
	want := map[int32]corev1.ServicePort{}
	for _, p := range svc.Spec.Ports {
		if p.Protocol == "" || p.Protocol == corev1.ProtocolTCP {
			want[p.Port] = p
		}
	}
	for port, f := range lb.ports {
		if w, ok := want[port]; !ok || w.Name != f.port.Name || w.TargetPort != f.port.TargetPort {
			f.close()
			delete(lb.ports, port)
		}
	}
	for port, sp := range want {
		if lb.ports[port] != nil {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(lb.ip, strconv.Itoa(int(port))))
		if err != nil {
			l.log.Error("load balancer: cannot listen", "service", lb.namespace+"/"+lb.name, "port", port, "err", err)
			continue
		}
		f := &portForwarder{ln: ln, port: sp, done: make(chan struct{})}
		lb.ports[port] = f
		go l.serve(lb, f)
	}
}

func (l *loadBalancers) remove(ctx context.Context, key string, lb *serviceLB) {
	for _, f := range lb.ports {
		f.close()
	}
	if err := ipCmd(ctx, "addr", "del", lb.ip+"/32", "dev", "lo"); err != nil {
		l.log.Warn("load balancer: cannot remove the address", "service", key, "ip", lb.ip, "err", err)
	}
	l.log.Info("load balancer removed", "service", key, "ip", lb.ip)
	if octet, err := strconv.Atoi(lb.ip[len("10.253.0."):]); err == nil {
		l.used[octet] = false
	}
	delete(l.byKey, key)
}

func (f *portForwarder) close() {
	_ = f.ln.Close()
	<-f.done
}

// serve accepts connections to one port and forwards each to a ready endpoint. It ends
// when the listener is closed; connections in flight end on their own.
func (l *loadBalancers) serve(lb *serviceLB, f *portForwarder) {
	defer close(f.done)
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		go l.forward(lb, f, c)
	}
}

func (l *loadBalancers) forward(lb *serviceLB, f *portForwarder, down net.Conn) {
	defer down.Close()
	eps := l.endpoints(lb, f.port)
	if len(eps) == 0 {
		return // no ready endpoint: the connection is refused, as a load balancer with no healthy backend does
	}
	target := eps[f.next.Add(1)%uint64(len(eps))]
	up, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(up, down)
	go pipe(down, up)
	<-done
	<-done
}

// endpoints are the ready addresses (host:port) behind a Service port.
func (l *loadBalancers) endpoints(lb *serviceLB, sp corev1.ServicePort) []string {
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: lb.name})
	slices, err := l.slices.EndpointSlices(lb.namespace).List(sel)
	if err != nil {
		return nil
	}
	var out []string
	for _, es := range slices {
		var port int32
		for _, p := range es.Ports {
			if p.Name != nil && *p.Name == sp.Name && p.Port != nil {
				port = *p.Port
			}
		}
		if port == 0 {
			continue
		}
		for _, ep := range es.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			for _, a := range ep.Addresses {
				out = append(out, net.JoinHostPort(a, strconv.Itoa(int(port))))
			}
		}
	}
	return out
}

// close removes every load balancer (their addresses, their listeners).
func (l *loadBalancers) close(ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	for key, lb := range l.byKey {
		l.remove(ctx, key, lb)
	}
}

// String is for logs.
func (lb *serviceLB) String() string { return fmt.Sprintf("%s/%s at %s", lb.namespace, lb.name, lb.ip) }
