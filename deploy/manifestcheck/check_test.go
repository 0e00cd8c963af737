package main

import (
	"bytes"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
)

// valid is a small, correct set of objects in the shape the charts render.
// Each test case below changes one thing in it.
const valid = `
# Source: comment-only documents are skipped
---
apiVersion: v1
kind: Service
metadata:
  name: svc-accounts
spec:
  selector:
    app.kubernetes.io/name: accounts
    app.kubernetes.io/component: api
  ports:
    - name: http
      port: 8080
      targetPort: http
---
apiVersion: v1
kind: Service
metadata:
  name: svc-accounts-ops
spec:
  selector:
    app.kubernetes.io/name: accounts
    app.kubernetes.io/component: api
  ports:
    - name: ops
      port: 9090
      targetPort: ops
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: svc-accounts
spec:
  podSelector:
    matchLabels:
      app.kubernetes.io/name: accounts
      app.kubernetes.io/component: api
  policyTypes: [Ingress]
  ingress:
    - ports: [{port: http, protocol: TCP}]
      from:
        - namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: ingress-nginx}}
          podSelector: {matchLabels: {app.kubernetes.io/name: ingress-nginx}}
    - ports: [{port: ops, protocol: TCP}]
      from:
        - namespaceSelector: {matchLabels: {svc.dev/operations: "true"}}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: svc-accounts
spec:
  selector:
    matchLabels:
      app.kubernetes.io/name: accounts
      app.kubernetes.io/component: api
  template:
    metadata:
      labels:
        app.kubernetes.io/name: accounts
        app.kubernetes.io/component: api
    spec:
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        seccompProfile:
          type: RuntimeDefault
      containers:
        - name: accounts
          image: svc-accounts:1.0.0
          args: [serve]
          ports:
            - name: http
              containerPort: 8080
            - name: ops
              containerPort: 9090
          env:
            - name: HTTP_ADDR
              value: ":8080"
            - name: OPS_HTTP_ADDR
              value: ":9090"
          resources:
            requests:
              cpu: 100m
              memory: 128Mi
            limits:
              memory: 256Mi
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities:
              drop: [ALL]
---
apiVersion: batch/v1
kind: Job
metadata:
  name: svc-accounts-migrate
spec:
  template:
    metadata:
      labels:
        app.kubernetes.io/name: accounts
        app.kubernetes.io/component: migration
    spec:
      restartPolicy: Never
      securityContext:
        runAsNonRoot: true
        seccompProfile:
          type: RuntimeDefault
      containers:
        - name: migrate
          image: svc-accounts:1.0.0
          args: [migrate]
          resources:
            requests: {cpu: 100m, memory: 128Mi}
            limits: {memory: 256Mi}
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities:
              drop: [ALL]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: svc-accounts
spec:
  maxUnavailable: 1
  selector:
    matchLabels:
      app.kubernetes.io/name: accounts
      app.kubernetes.io/component: api
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: svc-public
spec:
  rules:
    - http:
        paths:
          - path: /api/v1/cli
            pathType: Prefix
            backend:
              service:
                name: svc-accounts
                port:
                  name: http
---
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: svc-accounts
spec:
  endpoints: [{port: http}]
`

// hpa is appended by the autoscaling cases; the Deployment must then drop
// its replicas.
const hpa = `
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: svc-accounts
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: svc-accounts
  minReplicas: 2
  maxReplicas: 4
  metrics:
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: 70
`

func replace(t *testing.T, s, old, new string) string {
	t.Helper()
	if !strings.Contains(s, old) {
		t.Fatalf("fixture does not contain %q", old)
	}
	return strings.Replace(s, old, new, 1)
}

func TestCheck(t *testing.T) {
	cases := []struct {
		name string
		in   func(t *testing.T) string
		want []string // substrings, one per expected problem; none: passes
	}{
		{
			name: "valid manifests pass",
			in:   func(t *testing.T) string { return valid },
		},
		{
			name: "misspelled field is refused",
			in: func(t *testing.T) string {
				return replace(t, valid, "containerPort: 8080", "contanerPort: 8080")
			},
			want: []string{`unknown field "spec.template.spec.containers[0].ports[0].contanerPort"`},
		},
		{
			name: "wrongly cased field is refused",
			in: func(t *testing.T) string {
				return replace(t, valid, "readOnlyRootFilesystem: true\n            capabilities:\n              drop: [ALL]\n---\napiVersion: batch/v1",
					"ReadOnlyRootFilesystem: true\n            capabilities:\n              drop: [ALL]\n---\napiVersion: batch/v1")
			},
			want: []string{`unknown field "spec.template.spec.containers[0].securityContext.ReadOnlyRootFilesystem"`, "readOnlyRootFilesystem must be true"},
		},
		{
			name: "duplicate key is refused",
			in: func(t *testing.T) string {
				return replace(t, valid, "  maxUnavailable: 1\n", "  maxUnavailable: 1\n  maxUnavailable: 2\n")
			},
			want: []string{`"maxUnavailable"`},
		},
		{
			name: "wrong value type is refused",
			in: func(t *testing.T) string {
				return replace(t, valid, "containerPort: 8080", `containerPort: "8080"`)
			},
			want: []string{"does not decode into apps/v1/Deployment"},
		},
		{
			name: "unknown kind is refused",
			in: func(t *testing.T) string {
				return replace(t, valid, "kind: PodDisruptionBudget", "kind: PodDisruptionBudgett")
			},
			want: []string{"unknown kind policy/v1/PodDisruptionBudgett"},
		},
		{
			name: "removed apiVersion is refused",
			in: func(t *testing.T) string {
				return replace(t, valid, "apiVersion: policy/v1\n", "apiVersion: policy/v1beta1\n")
			},
			want: []string{"apiVersion policy/v1beta1 is not supported for PodDisruptionBudget (use policy/v1)"},
		},
		{
			name: "missing name is refused",
			in: func(t *testing.T) string {
				return replace(t, valid, "  name: svc-accounts-migrate\n", "  labels: {}\n")
			},
			want: []string{"metadata.name is required"},
		},
		{
			name: "ingress exact admin path is refused",
			in: func(t *testing.T) string {
				return replace(t, valid, "path: /api/v1/cli\n            pathType: Prefix", "path: /admin/v1/programs\n            pathType: Exact")
			},
			want: []string{"routes /admin/v1/"},
		},
		{
			name: "ingress admin path in other case is refused",
			in: func(t *testing.T) string {
				return replace(t, valid, "path: /api/v1/cli", "path: /ADMIN")
			},
			want: []string{"routes /admin/v1/"},
		},
		{
			name: "ingress root prefix is refused",
			in: func(t *testing.T) string {
				return replace(t, valid, "path: /api/v1/cli", "path: /")
			},
			want: []string{"routes /admin/v1/"},
		},
		{
			name: "ingress partial prefix of admin is refused",
			in: func(t *testing.T) string {
				return replace(t, valid, "path: /api/v1/cli", "path: /adm")
			},
			want: []string{"routes /admin/v1/"},
		},
		{
			name: "ingress dot-dot path is refused",
			in: func(t *testing.T) string {
				return replace(t, valid, "path: /api/v1/cli", "path: /api/../admin")
			},
			want: []string{"normalised"},
		},
		{
			name: "ingress implementation-specific path is refused",
			in: func(t *testing.T) string {
				return replace(t, valid, "pathType: Prefix", "pathType: ImplementationSpecific")
			},
			want: []string{"pathType ImplementationSpecific cannot be checked"},
		},
		{
			name: "a regex Ingress (use-regex) routing the console's wildcard paths under /api/ is accepted",
			in: func(t *testing.T) string {
				return replace(t, replace(t, replace(t, valid, "pathType: Prefix", "pathType: ImplementationSpecific"),
					"path: /api/v1/cli", `path: "/api/v1/programs/[^/]+/payouts/[^/]+/[^/]+$"`),
					"name: svc-public\n", "name: svc-public-regex\n  annotations:\n    nginx.ingress.kubernetes.io/use-regex: \"true\"\n")
			},
		},
		{
			name: "a regex path that could reach /admin is refused, use-regex or not",
			in: func(t *testing.T) string {
				return replace(t, replace(t, replace(t, valid, "pathType: Prefix", "pathType: ImplementationSpecific"),
					"path: /api/v1/cli", `path: "/(api|admin)/v1/.*"`),
					"name: svc-public\n", "name: svc-public-regex\n  annotations:\n    nginx.ingress.kubernetes.io/use-regex: \"true\"\n")
			},
			want: []string{"regex path must begin with the literal /api/"},
		},
		{
			name: "ingress default backend is refused",
			in: func(t *testing.T) string {
				return replace(t, valid, "spec:\n  rules:", "spec:\n  defaultBackend:\n    service:\n      name: svc-accounts\n      port: {name: http}\n  rules:")
			},
			want: []string{"spec.defaultBackend is not allowed"},
		},
		{
			name: "ingress annotation mentioning admin is refused",
			in: func(t *testing.T) string {
				return replace(t, valid, "  name: svc-public\n", "  name: svc-public\n  annotations:\n    nginx.ingress.kubernetes.io/rewrite-target: /admin/v1/$1\n")
			},
			want: []string{"annotation nginx.ingress.kubernetes.io/rewrite-target mentions /admin"},
		},
		{
			name: "ingress internal path is refused",
			in: func(t *testing.T) string {
				return replace(t, valid, "path: /api/v1/cli\n            pathType: Prefix", "path: /internal/v1/attributions\n            pathType: Exact")
			},
			want: []string{"routes /internal/v1/"},
		},
		{
			name: "ingress annotation mentioning internal is refused",
			in: func(t *testing.T) string {
				return replace(t, valid, "  name: svc-public\n", "  name: svc-public\n  annotations:\n    nginx.ingress.kubernetes.io/rewrite-target: /internal/v1/$1\n")
			},
			want: []string{"annotation nginx.ingress.kubernetes.io/rewrite-target mentions /internal"},
		},
		{
			name: "ingress backend to a missing service is refused",
			in: func(t *testing.T) string {
				return replace(t, valid, "                name: svc-accounts\n                port:", "                name: svc-acounts\n                port:")
			},
			want: []string{`backend Service "svc-acounts" is not in the input`},
		},
		{
			name: "ingress backend to a missing port is refused",
			in: func(t *testing.T) string {
				return replace(t, valid, "                port:\n                  name: http", "                port:\n                  name: https")
			},
			want: []string{`Service "svc-accounts" has no port named "https"`},
		},
		{
			name: "service selecting no pods is refused",
			in: func(t *testing.T) string {
				return replace(t, valid, "    app.kubernetes.io/name: accounts\n    app.kubernetes.io/component: api\n  ports:",
					"    app.kubernetes.io/name: acounts\n    app.kubernetes.io/component: api\n  ports:")
			},
			want: []string{"Service/svc-accounts): selector matches no Deployment"},
		},
		{
			name: "deployment selector not matching its template is refused",
			in: func(t *testing.T) string {
				return replace(t, valid, "    matchLabels:\n      app.kubernetes.io/name: accounts\n      app.kubernetes.io/component: api\n  template:",
					"    matchLabels:\n      app.kubernetes.io/name: accounts\n      app.kubernetes.io/component: worker\n  template:")
			},
			want: []string{"spec.selector does not match spec.template.metadata.labels"},
		},
		{
			name: "pod without runAsNonRoot is refused",
			in: func(t *testing.T) string {
				return replace(t, valid, "        runAsNonRoot: true\n        runAsUser: 65532\n", "        runAsUser: 65532\n")
			},
			want: []string{"container accounts: runAsNonRoot must be true"},
		},
		{
			name: "container keeping capabilities is refused",
			in: func(t *testing.T) string {
				return replace(t, valid, "drop: [ALL]", "drop: [NET_RAW]")
			},
			want: []string{"container accounts: securityContext.capabilities.drop must contain ALL"},
		},
		{
			name: "container without memory limit is refused",
			in: func(t *testing.T) string {
				return replace(t, valid, "            limits:\n              memory: 256Mi\n", "")
			},
			want: []string{"container accounts: resources.limits.memory is required"},
		},
		{
			name: "duplicate env variable is refused",
			in: func(t *testing.T) string {
				return replace(t, valid, "              value: \":8080\"\n", "              value: \":8080\"\n            - name: HTTP_ADDR\n              value: \":8080\"\n")
			},
			want: []string{"environment variable HTTP_ADDR is set twice"},
		},
		{
			name: "skip annotation waives a named check",
			in: func(t *testing.T) string {
				s := replace(t, valid, "kind: Deployment\nmetadata:\n  name: svc-accounts\n",
					"kind: Deployment\nmetadata:\n  name: svc-accounts\n  annotations:\n    manifestcheck.svc.dev/skip: readOnlyRootFilesystem\n")
				return replace(t, s, "            readOnlyRootFilesystem: true\n            capabilities:\n              drop: [ALL]\n---\napiVersion: batch/v1",
					"            capabilities:\n              drop: [ALL]\n---\napiVersion: batch/v1")
			},
		},
		{
			name: "skip annotation with an unknown check is refused",
			in: func(t *testing.T) string {
				return replace(t, valid, "kind: Deployment\nmetadata:\n  name: svc-accounts\n",
					"kind: Deployment\nmetadata:\n  name: svc-accounts\n  annotations:\n    manifestcheck.svc.dev/skip: readOnlyRootFS\n")
			},
			want: []string{`unknown check "readOnlyRootFS"`},
		},
		{
			name: "autoscaled deployment without replicas passes",
			in:   func(t *testing.T) string { return valid + hpa },
		},
		{
			name: "autoscaled deployment with replicas is refused",
			in: func(t *testing.T) string {
				return replace(t, valid, "kind: Deployment\nmetadata:\n  name: svc-accounts\nspec:\n",
					"kind: Deployment\nmetadata:\n  name: svc-accounts\nspec:\n  replicas: 2\n") + hpa
			},
			want: []string{"target Deployment/svc-accounts sets spec.replicas"},
		},
		{
			name: "hpa with a missing target is refused",
			in: func(t *testing.T) string {
				return valid + strings.Replace(hpa, "    name: svc-accounts", "    name: svc-acounts", 1)
			},
			want: []string{"scaleTargetRef apps/v1 Deployment/svc-acounts is not in the input"},
		},
		{
			name: "duplicate object is refused",
			in: func(t *testing.T) string {
				return valid + "\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n"
			},
			want: []string{"(Secret/s): duplicate of document"},
		},
	}
	cases = append(cases, clusterCases...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Check(strings.NewReader(tc.in(t)), Options{Unchecked: defaultUnchecked})
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			var got []string
			for _, p := range res.Problems {
				got = append(got, p.String())
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d problems, want %d:\n%s", len(got), len(tc.want), strings.Join(got, "\n"))
			}
			for _, w := range tc.want {
				found := false
				for _, g := range got {
					found = found || strings.Contains(g, w)
				}
				if !found {
					t.Errorf("no problem mentions %q; got:\n%s", w, strings.Join(got, "\n"))
				}
			}
		})
	}
}

func TestCheckCountsObjectsByKind(t *testing.T) {
	res, err := Check(strings.NewReader(valid), Options{Unchecked: defaultUnchecked})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"Service": 2, "NetworkPolicy": 1, "Deployment": 1, "Job": 1, "PodDisruptionBudget": 1, "Ingress": 1, "ServiceMonitor": 1}
	if res.Objects != 8 {
		t.Errorf("Objects = %d, want 8", res.Objects)
	}
	for kind, n := range want {
		if res.Counts[kind] != n {
			t.Errorf("Counts[%s] = %d, want %d", kind, res.Counts[kind], n)
		}
	}
}

func TestRun(t *testing.T) {
	cases := []struct {
		name       string
		args       []string
		in         string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{name: "valid input exits 0", in: valid, wantCode: 0, wantStdout: "manifestcheck: ok: Deployment=1,Ingress=1,Job=1,NetworkPolicy=1,PodDisruptionBudget=1,Service=2,ServiceMonitor=1"},
		{name: "expected counts met exits 0", args: []string{"-expect", "Deployment=1,Ingress=1,HorizontalPodAutoscaler=0"}, in: valid, wantCode: 0},
		{name: "expected count missed exits 1", args: []string{"-expect", "Deployment=2"}, in: valid, wantCode: 1, wantStderr: "expected 2 Deployment, found 1"},
		{name: "custom resource not allowed exits 1", args: []string{"-allow", ""}, in: valid, wantCode: 1, wantStderr: "unknown kind monitoring.coreos.com/v1/ServiceMonitor"},
		{name: "empty input exits 0", in: "", wantCode: 0, wantStdout: "no objects"},
		{name: "bad expect exits 2", args: []string{"-expect", "Deployment"}, in: valid, wantCode: 2, wantStderr: "is not Kind=count"},
		{name: "positional argument exits 2", args: []string{"file.yaml"}, in: valid, wantCode: 2, wantStderr: "read from stdin"},
		{name: "invalid yaml exits 1", in: "kind: [", wantCode: 1, wantStderr: "invalid YAML"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tc.args, strings.NewReader(tc.in), &stdout, &stderr)
			if code != tc.wantCode {
				t.Errorf("exit code %d, want %d (stderr: %s)", code, tc.wantCode, stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.wantStdout) {
				t.Errorf("stdout %q does not contain %q", stdout.String(), tc.wantStdout)
			}
			if !strings.Contains(stderr.String(), tc.wantStderr) {
				t.Errorf("stderr %q does not contain %q", stderr.String(), tc.wantStderr)
			}
		})
	}
}

func TestAdminExposure(t *testing.T) {
	cases := []struct {
		path, pathType string
		exposes        bool
	}{
		{"/api/v1/track", "Prefix", false},
		{"/api/v1/track/sale", "Exact", false},
		{"/api/tracking", "Prefix", false},
		{"/administrator-docs", "Prefix", true}, // conservative: starts with /admin
		{"/admin", "Exact", true},
		{"/internal/v1/attributions", "Exact", true},
		{"/internal", "Prefix", true},
		{"/Internal/v1/", "Prefix", true},
		{"/int", "Prefix", true}, // a string prefix of /internal/
		{"/admin/v1/", "Prefix", true},
		{"/Admin/V1", "Prefix", true},
		{"/", "Prefix", true},
		{"/", "Exact", true},
		{"/a", "Prefix", true},
		{"/b", "Prefix", false},
		{"/api//v1", "Prefix", true},
		{"/api/./v1", "Prefix", true},
		{"api/v1", "Prefix", true},
		{"/api/v1/.*", "ImplementationSpecific", true},
	}
	for _, tc := range []struct {
		path    string
		exposes bool
	}{
		{"/api/v1/programs/[^/]+/commissions$", false},
		{"/api/v1/programs/[^/]+/payouts/[^/]+/[^/]+$", false},
		{"/api/.*", false},
		{"/.*", true},
		{"/a.*", true},
		{"/(api|admin)/v1", true},
		{"/(?i)api/x", true},
		{"/api/v1/(", true},
		{"/ap?i/", true},
		{"/internal/v1/.*", true},
	} {
		t.Run("regex "+tc.path, func(t *testing.T) {
			if why := regexExposure(tc.path); (why != "") != tc.exposes {
				t.Errorf("regexExposure(%q) = %q, want exposes=%v", tc.path, why, tc.exposes)
			}
		})
	}
	for _, tc := range cases {
		t.Run(tc.pathType+" "+tc.path, func(t *testing.T) {
			pt := networkingv1.PathType(tc.pathType)
			why := adminExposure(tc.path, &pt)
			if (why != "") != tc.exposes {
				t.Errorf("adminExposure(%q, %s) = %q, want exposes=%v", tc.path, tc.pathType, why, tc.exposes)
			}
		})
	}
}
