{{- define "svc-lib.service" -}}
{{- $v := .Values -}}
{{- $api := dict "ctx" . "component" "api" -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "svc-lib.fullname" . }}
  labels:
    {{- include "svc-lib.labels" $api | nindent 4 }}
  {{- with $v.service.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  type: {{ $v.service.type }}
  selector:
    {{- include "svc-lib.selectorLabels" $api | nindent 4 }}
  ports:
    # The public API and the probes only: this is the Service the umbrella's
    # Ingress routes to, and the service answers /admin/, /internal/ and
    # /metrics 404 on this port. Those are on <fullname>-ops.
    - name: http
      port: {{ int $v.service.port }}
      targetPort: http
      protocol: TCP
{{- end -}}

{{/*
The operations Service: the container's ops port (OPS_HTTP_ADDR), serving the
admin API, the service-to-service /internal/v1/ routes and /metrics. No
Ingress may route to it (deploy/manifestcheck refuses one that does); the
NetworkPolicy admits operators, Prometheus and the release's internal
callers to it.
*/}}
{{- define "svc-lib.opsService" -}}
{{- $v := .Values -}}
{{- $api := dict "ctx" . "component" "api" -}}
{{- $ops := dict "ctx" . "component" "ops" -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "svc-lib.fullname" . }}-ops
  labels:
    {{- include "svc-lib.labels" $ops | nindent 4 }}
spec:
  type: ClusterIP
  selector:
    {{- include "svc-lib.selectorLabels" $api | nindent 4 }}
  ports:
    - name: ops
      port: {{ int $v.opsPort }}
      targetPort: ops
      protocol: TCP
{{- end -}}

{{- define "svc-lib.serviceMonitor" -}}
{{- $v := .Values -}}
{{- $want := toString $v.serviceMonitor.enabled -}}
{{- if not (has $want (list "auto" "true" "false")) -}}
{{- fail (printf "svc-lib: serviceMonitor.enabled must be auto, true or false, got %q" $want) -}}
{{- end -}}
{{- if or (eq $want "true") (and (eq $want "auto") (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1/ServiceMonitor")) -}}
{{- $api := dict "ctx" . "component" "api" -}}
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: {{ include "svc-lib.fullname" . }}
  labels:
    {{- include "svc-lib.labels" $api | nindent 4 }}
    {{- with $v.serviceMonitor.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  namespaceSelector:
    matchNames:
      - {{ .Release.Namespace }}
  # The operations Service: /metrics is served on the ops port only.
  selector:
    matchLabels:
      {{- include "svc-lib.selectorLabels" (dict "ctx" . "component" "ops") | nindent 6 }}
  endpoints:
    - port: ops
      path: /metrics
      interval: {{ $v.serviceMonitor.interval }}
      scrapeTimeout: {{ $v.serviceMonitor.scrapeTimeout }}
{{- end -}}
{{- end -}}

{{- define "svc-lib.pdb" -}}
{{- $v := .Values -}}
{{- if $v.pdb.enabled -}}
{{- $api := dict "ctx" . "component" "api" -}}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "svc-lib.fullname" . }}
  labels:
    {{- include "svc-lib.labels" $api | nindent 4 }}
spec:
  {{- if hasKey $v.pdb "minAvailable" }}
  minAvailable: {{ $v.pdb.minAvailable }}
  {{- else }}
  maxUnavailable: {{ $v.pdb.maxUnavailable }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "svc-lib.selectorLabels" $api | nindent 6 }}
{{- end -}}
{{- end -}}

{{- define "svc-lib.hpa" -}}
{{- $v := .Values -}}
{{- $as := $v.autoscaling -}}
{{- if $as.enabled -}}
{{- $api := dict "ctx" . "component" "api" -}}
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {{ include "svc-lib.fullname" . }}
  labels:
    {{- include "svc-lib.labels" $api | nindent 4 }}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: {{ include "svc-lib.fullname" . }}
  minReplicas: {{ int $as.minReplicas }}
  maxReplicas: {{ int $as.maxReplicas }}
  metrics:
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: {{ int $as.targetCPUUtilizationPercentage }}
    {{- if $as.targetMemoryUtilizationPercentage }}
    - type: Resource
      resource:
        name: memory
        target:
          type: Utilization
          averageUtilization: {{ int $as.targetMemoryUtilizationPercentage }}
    {{- end }}
{{- end -}}
{{- end -}}

{{/*
The service's Secret, only when secret.create is set (local development).
When migrations run as a hook the Secret must exist before the hook Job, so it
is itself a pre-install/pre-upgrade hook with a lower weight; Helm does not
delete hook objects on uninstall (delete it by hand).
*/}}
{{- define "svc-lib.secret" -}}
{{- $v := .Values -}}
{{- if $v.secret.create -}}
{{- $api := dict "ctx" . "component" "api" -}}
apiVersion: v1
kind: Secret
metadata:
  name: {{ include "svc-lib.secretName" . }}
  labels:
    {{- include "svc-lib.labels" $api | nindent 4 }}
  {{- if include "svc-lib.migrationHook" . }}
  annotations:
    helm.sh/hook: pre-install,pre-upgrade
    helm.sh/hook-weight: "-10"
    helm.sh/hook-delete-policy: before-hook-creation
  {{- end }}
type: Opaque
stringData:
  {{- range $name := $v.secretEnv }}
  {{- if not (hasKey $v.secret.data $name) }}
  {{- fail (printf "svc-lib: %s: secret.create is set but secret.data has no %s" $v.serviceName $name) }}
  {{- end }}
  {{ $name }}: {{ get $v.secret.data $name | toString | quote }}
  {{- end }}
  {{- range $name := $v.optionalSecretEnv }}
  {{- with get $v.secret.data $name | default "" | toString }}
  {{ $name }}: {{ . | quote }}
  {{- end }}
  {{- end }}
{{- end -}}
{{- end -}}
