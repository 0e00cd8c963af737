package main

import (
	"strings"
	"testing"
)

// secretWith is a chart-made Secret holding one variable.
func secretWith(name, value string) string {
	return "\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: svc-accounts\nstringData:\n  " + name + ": " + value + "\n"
}

// clusterCases check the in-cluster rules (issue 23): the operations port
// (admin, internal, metrics) never behind a Service the Ingress routes to,
// a NetworkPolicy admitting each port its callers only, no broad
// TRUSTED_PROXIES, no short shared token.
var clusterCases = []struct {
	name string
	in   func(t *testing.T) string
	want []string
}{
	{
		name: "a service without an operations port is refused",
		in: func(t *testing.T) string {
			return replace(t, valid, "            - name: OPS_HTTP_ADDR\n              value: \":9090\"\n", "")
		},
		want: []string{"container accounts: HTTP_ADDR without OPS_HTTP_ADDR serves /admin/, /internal/ and /metrics on the public port"},
	},
	{
		name: "an operations port equal to the public one is refused",
		in: func(t *testing.T) string {
			return replace(t, valid, "value: \":9090\"", "value: \":8080\"")
		},
		want: []string{"OPS_HTTP_ADDR :8080 is the public port"},
	},
	{
		name: "the Ingress's Service exposing the operations port by name is refused",
		in: func(t *testing.T) string {
			return replace(t, valid, "      port: 8080\n      targetPort: http\n", "      port: 8080\n      targetPort: http\n    - name: ops\n      port: 9090\n      targetPort: ops\n")
		},
		want: []string{`Service "svc-accounts", which the Ingress routes to, exposes the operations port 9090 (/admin/, /internal/, /metrics) on its port 9090`},
	},
	{
		name: "the Ingress's Service targeting the operations port by number is refused",
		in: func(t *testing.T) string {
			return replace(t, valid, "      port: 8080\n      targetPort: http\n", "      port: 8080\n      targetPort: 9090\n")
		},
		want: []string{"exposes the operations port 9090"},
	},
	{
		name: "an Ingress routing to the operations Service is refused",
		in: func(t *testing.T) string {
			return replace(t, valid, "                name: svc-accounts\n                port:\n                  name: http", "                name: svc-accounts-ops\n                port:\n                  name: ops")
		},
		want: []string{`Service "svc-accounts-ops", which the Ingress routes to, exposes the operations port`},
	},
	{
		name: "a service without a NetworkPolicy is refused",
		in: func(t *testing.T) string {
			return replace(t, valid, "kind: NetworkPolicy\nmetadata:\n  name: svc-accounts\nspec:\n  podSelector:\n    matchLabels:\n      app.kubernetes.io/name: accounts",
				"kind: NetworkPolicy\nmetadata:\n  name: svc-accounts\nspec:\n  podSelector:\n    matchLabels:\n      app.kubernetes.io/name: tracking")
		},
		want: []string{"no NetworkPolicy with policyTypes Ingress selects its pods"},
	},
	{
		name: "a NetworkPolicy for egress only does not count",
		in: func(t *testing.T) string {
			return replace(t, valid, "policyTypes: [Ingress]", "policyTypes: [Egress]")
		},
		want: []string{"no NetworkPolicy with policyTypes Ingress selects its pods"},
	},
	{
		name: "a rule without ports is refused",
		in: func(t *testing.T) string {
			return replace(t, valid, "    - ports: [{port: ops, protocol: TCP}]\n      from:", "    - from:")
		},
		want: []string{"ingress[1] names no port: it admits its peers to every port"},
	},
	{
		name: "a rule without peers is refused",
		in: func(t *testing.T) string {
			return replace(t, valid, "    - ports: [{port: ops, protocol: TCP}]\n      from:\n        - namespaceSelector: {matchLabels: {svc.dev/operations: \"true\"}}\n",
				"    - ports: [{port: ops, protocol: TCP}]\n")
		},
		want: []string{"ingress[1] names no peer: it admits every source"},
	},
	{
		name: "a peer of every namespace is refused",
		in: func(t *testing.T) string {
			return replace(t, valid, "        - namespaceSelector: {matchLabels: {svc.dev/operations: \"true\"}}", "        - namespaceSelector: {}")
		},
		want: []string{"ingress[1].from[0] selects every pod of every namespace"},
	},
	{
		name: "a peer of every address is refused",
		in: func(t *testing.T) string {
			return replace(t, valid, "        - namespaceSelector: {matchLabels: {svc.dev/operations: \"true\"}}", "        - ipBlock: {cidr: 0.0.0.0/0}")
		},
		want: []string{"ingress[1].from[0] admits 0.0.0.0/0"},
	},
	{
		name: "one rule for the public and the operations port is refused",
		in: func(t *testing.T) string {
			return replace(t, valid, "    - ports: [{port: http, protocol: TCP}]", "    - ports: [{port: http, protocol: TCP}, {port: 9090, protocol: TCP}]")
		},
		want: []string{"ingress[0] admits the same peers to the public and the operations port"},
	},
	{
		name: "a policy that admits no one to the public port is refused",
		in: func(t *testing.T) string {
			return replace(t, valid, "    - ports: [{port: http, protocol: TCP}]", "    - ports: [{port: 7000, protocol: TCP}]")
		},
		want: []string{"admit no one to the public port 8080: the Ingress cannot reach it"},
	},
	{
		name: "a narrow TRUSTED_PROXIES passes",
		in: func(t *testing.T) string {
			return replace(t, valid, "            - name: OPS_HTTP_ADDR", "            - name: TRUSTED_PROXIES\n              value: \"10.244.250.0/24,fd00:10:244:fa::/64\"\n            - name: OPS_HTTP_ADDR")
		},
	},
	{
		name: "a TRUSTED_PROXIES of whole private ranges is refused",
		in: func(t *testing.T) string {
			return replace(t, valid, "            - name: OPS_HTTP_ADDR", "            - name: TRUSTED_PROXIES\n              value: \"10.0.0.0/8,172.16.0.0/12,fc00::/7\"\n            - name: OPS_HTTP_ADDR")
		},
		want: []string{"TRUSTED_PROXIES trusts 10.0.0.0/8", "TRUSTED_PROXIES trusts 172.16.0.0/12", "TRUSTED_PROXIES trusts fc00::/7"},
	},
	{
		name: "an unparsable TRUSTED_PROXIES is refused",
		in: func(t *testing.T) string {
			return replace(t, valid, "            - name: OPS_HTTP_ADDR", "            - name: TRUSTED_PROXIES\n              value: \"ingress\"\n            - name: OPS_HTTP_ADDR")
		},
		want: []string{`TRUSTED_PROXIES: "ingress" is not a CIDR or address`},
	},
	{
		name: "a 32-byte token passes",
		in:   func(t *testing.T) string { return valid + secretWith("ADMIN_TOKEN", strings.Repeat("a", 32)) },
	},
	{
		name: "a short token in a Secret is refused",
		in:   func(t *testing.T) string { return valid + secretWith("INTERNAL_TOKEN", "local-internal-token") },
		want: []string{"INTERNAL_TOKEN is 20 bytes: the services refuse a token shorter than 32 bytes"},
	},
	{
		name: "a short token in base64 data is refused",
		in: func(t *testing.T) string {
			return valid + "\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: s\ndata:\n  ADMIN_TOKEN_PREVIOUS: c2hvcnQ=\n"
		},
		want: []string{"ADMIN_TOKEN_PREVIOUS is 5 bytes"},
	},
	{
		name: "a short token in a container's environment is refused",
		in: func(t *testing.T) string {
			return replace(t, valid, "            - name: OPS_HTTP_ADDR", "            - name: ADMIN_TOKEN\n              value: \"t\"\n            - name: OPS_HTTP_ADDR")
		},
		want: []string{"container accounts: ADMIN_TOKEN is 1 bytes"},
	},
}
