{{/*
svc-lib.networkPolicy: the service's pods accept connections only from what
is listed, port by port (a pod selected by a NetworkPolicy with the Ingress
policy type refuses everything else, so this is the deny by default):
  - the public port (http): the ingress controller
    (global.networkPolicy.ingressController) and the release's services in
    networkPolicy.publicCallers;
  - the operations port (ops: /admin/v1/, /internal/v1/, /metrics):
    Prometheus (global.networkPolicy.prometheus), the operators' namespaces
    (global.networkPolicy.operations) and the release's services in
    networkPolicy.internalCallers.
NetworkPolicies work on ports, not paths: whoever reaches the operations port
reaches all three route families, which still need their tokens (ADMIN_TOKEN,
INTERNAL_TOKEN). A rule whose peer list is empty is left out: a rule without
`from` would admit every source. Egress is not restricted (the database,
brokers, collector and identity provider are addresses of each
installation). The kubelet's probes come from the node, which common CNIs
admit whatever the policy says.
*/}}
{{- define "svc-lib.networkPolicy" -}}
{{- $v := .Values -}}
{{- $np := $v.global.networkPolicy | default dict -}}
{{- if $np.enabled -}}
{{- $api := dict "ctx" . "component" "api" -}}
{{- $release := .Release.Name -}}
{{- $callers := dict "publicCallers" list "internalCallers" list -}}
{{- range $kind := list "publicCallers" "internalCallers" -}}
{{- $peers := list -}}
{{- range $name := (get ($v.networkPolicy | default dict) $kind | default list) -}}
{{- $peers = append $peers (dict "podSelector" (dict "matchLabels" (dict "app.kubernetes.io/name" $name "app.kubernetes.io/instance" $release "app.kubernetes.io/component" "api"))) -}}
{{- end -}}
{{- $_ := set $callers $kind $peers -}}
{{- end -}}
{{- $rules := list
      (dict "port" "http" "what" "the public API: the ingress controller" "from" (concat ($np.ingressController | default list) (get $callers "publicCallers")))
      (dict "port" "ops" "what" "/metrics: Prometheus" "from" ($np.prometheus | default list))
      (dict "port" "ops" "what" "/admin/v1/: the operators' namespaces" "from" ($np.operations | default list))
      (dict "port" "ops" "what" "/internal/v1/: the release's internal callers" "from" (get $callers "internalCallers")) -}}
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: {{ include "svc-lib.fullname" . }}
  labels:
    {{- include "svc-lib.labels" $api | nindent 4 }}
spec:
  podSelector:
    matchLabels:
      {{- include "svc-lib.selectorLabels" $api | nindent 6 }}
  policyTypes: [Ingress]
  ingress:
    {{- range $rules }}
    {{- if .from }}
    # {{ .what }}
    - ports:
        - port: {{ .port }}
          protocol: TCP
      from:
        {{- toYaml .from | nindent 8 }}
    {{- end }}
    {{- end }}
{{- end -}}
{{- end -}}
