package main

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The in-cluster rules (issue 23). A service of svc (a container setting
// HTTP_ADDR) serves its admin API, its service-to-service routes and
// /metrics on a second port, OPS_HTTP_ADDR; no Service an Ingress routes to
// may expose that port, and a NetworkPolicy must admit each of its ports
// to named peers only. TRUSTED_PROXIES must not trust whole ranges, and a
// shared token must be as long as the services require.

// minTokenBytes is libs/obs.MinTokenBytes: the services refuse to start
// with a shorter ADMIN_TOKEN or INTERNAL_TOKEN.
const minTokenBytes = 32

// tokenVariables are the shared tokens the services check the length of.
var tokenVariables = map[string]bool{
	"ADMIN_TOKEN": true, "ADMIN_TOKEN_PREVIOUS": true, "INTERNAL_TOKEN": true, "INTERNAL_TOKEN_PREVIOUS": true,
}

// Broadest TRUSTED_PROXIES prefixes accepted: a /20 is 4,096 addresses
// (a few nodes' pod ranges); anything wider, such as a private range or a
// cluster's whole pod CIDR, holds pods and clients that are not proxies,
// and each would choose its own client address with X-Forwarded-For.
const (
	minTrustedBitsV4 = 20
	minTrustedBitsV6 = 56
)

// svcPod is a serving workload of svc with its two ports.
type svcPod struct {
	w          workload
	public     int32
	ops        int32
	portByName map[string]int32
}

func clusterCheck(objects []object, workloads []workload) []Problem {
	var problems []Problem
	var pods []svcPod
	for _, w := range workloads {
		add := func(format string, args ...any) {
			problems = append(problems, Problem{Doc: w.obj.doc, Ref: w.obj.ref(), Msg: fmt.Sprintf(format, args...)})
		}
		for _, c := range append(append([]corev1.Container{}, w.template.Spec.InitContainers...), w.template.Spec.Containers...) {
			env := map[string]string{}
			for _, e := range c.Env {
				if e.ValueFrom == nil {
					env[e.Name] = e.Value
				}
			}
			if v, ok := env["TRUSTED_PROXIES"]; ok {
				for _, msg := range checkTrustedProxies(v) {
					add("container %s: %s", c.Name, msg)
				}
			}
			for name, v := range env {
				if tokenVariables[name] && v != "" && len(v) < minTokenBytes {
					add("container %s: %s", c.Name, shortToken(name, len(v)))
				}
			}
			httpAddr, ok := env["HTTP_ADDR"]
			if !ok || !w.serves {
				continue
			}
			opsAddr, ok := env["OPS_HTTP_ADDR"]
			if !ok {
				add("container %s: HTTP_ADDR without OPS_HTTP_ADDR serves /admin/, /internal/ and /metrics on the public port", c.Name)
				continue
			}
			public, ops := addrPort(httpAddr), addrPort(opsAddr)
			if public == 0 || ops == 0 {
				add("container %s: HTTP_ADDR %q or OPS_HTTP_ADDR %q has no port", c.Name, httpAddr, opsAddr)
				continue
			}
			if public == ops {
				add("container %s: OPS_HTTP_ADDR %s is the public port: /admin/, /internal/ and /metrics need a port of their own", c.Name, opsAddr)
				continue
			}
			p := svcPod{w: w, public: public, ops: ops, portByName: map[string]int32{}}
			for _, cp := range c.Ports {
				if cp.Name != "" {
					p.portByName[cp.Name] = cp.ContainerPort
				}
			}
			pods = append(pods, p)
		}
	}

	backends := map[string]bool{}
	var policies []object
	for _, o := range objects {
		switch t := o.typed.(type) {
		case *networkingv1.Ingress:
			for _, rule := range t.Spec.Rules {
				if rule.HTTP == nil {
					continue
				}
				for _, path := range rule.HTTP.Paths {
					if path.Backend.Service != nil {
						backends[path.Backend.Service.Name] = true
					}
				}
			}
		case *networkingv1.NetworkPolicy:
			policies = append(policies, o)
		case *corev1.Secret:
			for name, v := range t.StringData {
				if tokenVariables[name] && v != "" && len(v) < minTokenBytes {
					problems = append(problems, Problem{Doc: o.doc, Ref: o.ref(), Msg: shortToken(name, len(v))})
				}
			}
			for name, v := range t.Data {
				if _, dup := t.StringData[name]; !dup && tokenVariables[name] && len(v) > 0 && len(v) < minTokenBytes {
					problems = append(problems, Problem{Doc: o.doc, Ref: o.ref(), Msg: shortToken(name, len(v))})
				}
			}
		}
	}
	for _, o := range objects {
		if svc, ok := o.typed.(*corev1.Service); ok && backends[o.name] {
			problems = append(problems, checkPublicService(o, svc, pods)...)
		}
	}
	checked := map[string]bool{}
	for _, p := range pods {
		problems = append(problems, checkPolicies(p, policies, checked)...)
	}
	return problems
}

func shortToken(name string, n int) string {
	return fmt.Sprintf("%s is %d bytes: the services refuse a token shorter than %d bytes", name, n, minTokenBytes)
}

// addrPort is the port of a listen address (":8080", "0.0.0.0:9090"), or 0.
func addrPort(addr string) int32 {
	i := strings.LastIndexByte(addr, ':')
	n, err := strconv.ParseInt(addr[i+1:], 10, 32)
	if err != nil || n <= 0 {
		return 0
	}
	return int32(n)
}

func checkTrustedProxies(v string) []string {
	var out []string
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		prefix, err := netip.ParsePrefix(item)
		if err != nil {
			addr, aerr := netip.ParseAddr(item)
			if aerr != nil {
				out = append(out, fmt.Sprintf("TRUSTED_PROXIES: %q is not a CIDR or address", item))
				continue
			}
			prefix = netip.PrefixFrom(addr, addr.BitLen())
		}
		if min := minTrustedBitsV4; prefix.Addr().Is6() && !prefix.Addr().Is4In6() && prefix.Bits() < minTrustedBitsV6 ||
			!prefix.Addr().Is6() && prefix.Bits() < min {
			out = append(out, fmt.Sprintf("TRUSTED_PROXIES trusts %s: a range this broad holds pods and clients that are not proxies, each free to choose its client address (name the ingress controller's pods: charts/README.md, \"Trusted proxies\")", item))
		}
	}
	return out
}

// targetPort resolves a Service or NetworkPolicy port against a pod's
// named container ports: a number is itself, a name the container port of
// that name (0 when the pod has none).
func (p svcPod) targetPort(port intstr.IntOrString) int32 {
	if port.Type == intstr.String {
		return p.portByName[port.StrVal]
	}
	return port.IntVal
}

// declares reports whether a container port of the pod has number n.
func (p svcPod) declares(n int32) bool {
	for _, v := range p.portByName {
		if v == n {
			return true
		}
	}
	return false
}

// checkPublicService: a Service the Ingress routes to must not lead to a
// pod's operations port.
func checkPublicService(o object, svc *corev1.Service, pods []svcPod) []Problem {
	var problems []Problem
	for _, p := range pods {
		if len(svc.Spec.Selector) == 0 || !labelsMatch(svc.Spec.Selector, p.w.template.Labels) {
			continue
		}
		for _, sp := range svc.Spec.Ports {
			target := sp.TargetPort
			if target.Type == intstr.Int && target.IntVal == 0 {
				target = intstr.FromInt32(sp.Port)
			}
			if p.targetPort(target) == p.ops {
				problems = append(problems, Problem{Doc: o.doc, Ref: o.ref(), Msg: fmt.Sprintf(
					"Service %q, which the Ingress routes to, exposes the operations port %d (/admin/, /internal/, /metrics) on its port %d of %s",
					o.name, p.ops, sp.Port, p.w.obj.ref())})
			}
		}
	}
	return problems
}

// selects reports whether a NetworkPolicy's podSelector selects the pod
// (matchLabels only, like selectsAny; an empty selector selects every pod).
func selects(sel metav1.LabelSelector, labels map[string]string) bool {
	return labelsMatch(sel.MatchLabels, labels)
}

func isIngressPolicy(np *networkingv1.NetworkPolicy) bool {
	if len(np.Spec.PolicyTypes) == 0 {
		return true // the API server defaults to Ingress
	}
	for _, t := range np.Spec.PolicyTypes {
		if t == networkingv1.PolicyTypeIngress {
			return true
		}
	}
	return false
}

// checkPolicies checks the NetworkPolicies selecting p: at least one with
// the Ingress type (so the pod refuses what is not listed), every rule with
// ports and named peers, no rule admitting the same peers to the public and
// the operations port, and someone admitted to the public port. checked
// holds the rules already reported (a policy may select several pods).
func checkPolicies(p svcPod, policies []object, checked map[string]bool) []Problem {
	var problems []Problem
	selected, publicAdmitted := false, false
	for _, o := range policies {
		np := o.typed.(*networkingv1.NetworkPolicy)
		if !isIngressPolicy(np) || !selects(np.Spec.PodSelector, p.w.template.Labels) {
			continue
		}
		selected = true
		for i, rule := range np.Spec.Ingress {
			add := func(format string, args ...any) {
				key := o.ref() + fmt.Sprintf(format, args...)
				if !checked[key] {
					checked[key] = true
					problems = append(problems, Problem{Doc: o.doc, Ref: o.ref(), Msg: fmt.Sprintf(format, args...)})
				}
			}
			if len(rule.From) == 0 {
				add("ingress[%d] names no peer: it admits every source", i)
			}
			for j, peer := range rule.From {
				if peer.IPBlock != nil {
					if prefix, err := netip.ParsePrefix(peer.IPBlock.CIDR); err == nil && prefix.Bits() == 0 {
						add("ingress[%d].from[%d] admits %s", i, j, peer.IPBlock.CIDR)
					}
				}
				if peer.NamespaceSelector != nil && emptySelector(peer.NamespaceSelector) && (peer.PodSelector == nil || emptySelector(peer.PodSelector)) {
					add("ingress[%d].from[%d] selects every pod of every namespace", i, j)
				}
			}
			if len(rule.Ports) == 0 {
				add("ingress[%d] names no port: it admits its peers to every port", i)
				continue
			}
			public, ops := false, false
			for _, port := range rule.Ports {
				if port.Port == nil {
					public, ops = true, true
					continue
				}
				n := p.targetPort(*port.Port)
				end := n
				if port.EndPort != nil {
					end = *port.EndPort
				}
				public = public || n <= p.public && p.public <= end
				ops = ops || n <= p.ops && p.ops <= end
			}
			if public && ops {
				add("ingress[%d] admits the same peers to the public and the operations port (/admin/, /internal/, /metrics): give each its own rule", i)
			}
			publicAdmitted = publicAdmitted || public && len(rule.From) > 0
		}
	}
	switch {
	case !selected:
		problems = append(problems, Problem{Doc: p.w.obj.doc, Ref: p.w.obj.ref(), Msg: "no NetworkPolicy with policyTypes Ingress selects its pods: every pod of the cluster reaches its public and operations ports"})
	case !publicAdmitted && p.declares(p.public):
		// (A pod declaring no container port of its public number has a
		// broken template, reported by the strict decoding.)
		problems = append(problems, Problem{Doc: p.w.obj.doc, Ref: p.w.obj.ref(), Msg: fmt.Sprintf("its NetworkPolicies admit no one to the public port %d: the Ingress cannot reach it", p.public)})
	}
	return problems
}

func emptySelector(s *metav1.LabelSelector) bool {
	return len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0
}
