{{/*
Pieces shared by the Deployment's pods and the migration Job's pod, so the
security settings, image and environment cannot drift between them.
*/}}

{{/* Environment of the service container (and of the migration container). */}}
{{- define "svc-lib.env" -}}
{{- $v := .Values -}}
{{- $g := $v.global -}}
{{- $env := dict
      "HTTP_ADDR" (printf ":%d" (int $v.port))
      "OPS_HTTP_ADDR" (printf ":%d" (int $v.opsPort))
      "DB_SCHEMA" ($v.dbSchema | default $v.serviceName)
      "OTEL_SERVICE_NAME" $v.serviceName
      "LOG_LEVEL" ($v.logLevel | default $g.logLevel)
      "KAFKA_BROKERS" ($v.kafkaBrokers | default $g.kafkaBrokers)
      "KAFKA_REPLICATION_FACTOR" ($g.kafkaReplicationFactor | default "")
      "KAFKA_MIN_INSYNC_REPLICAS" ($g.kafkaMinInsyncReplicas | default "")
      "TRUSTED_PROXIES" ($v.trustedProxies | default $g.trustedProxies)
      "OTEL_EXPORTER_OTLP_ENDPOINT" ($v.otelEndpoint | default $g.otelEndpoint) -}}
{{- range $name, $value := $v.env -}}
{{- $_ := set $env $name (tpl (toString $value) $) -}}
{{- end -}}
{{- range $name := $v.requiredEnv -}}
{{- if not (get $env $name) -}}
{{- fail (printf "svc-lib: %s: environment variable %s is required but empty" $v.serviceName $name) -}}
{{- end -}}
{{- end -}}
{{- range $name := $v.secretEnv -}}
{{- if hasKey $env $name -}}
{{- fail (printf "svc-lib: %s: %s is both in env and secretEnv" $v.serviceName $name) -}}
{{- end -}}
{{- end -}}
{{- range $name := $v.optionalSecretEnv -}}
{{- if hasKey $env $name -}}
{{- fail (printf "svc-lib: %s: %s is both in env and optionalSecretEnv" $v.serviceName $name) -}}
{{- end -}}
{{- if has $name $v.secretEnv -}}
{{- fail (printf "svc-lib: %s: %s is both in secretEnv and optionalSecretEnv" $v.serviceName $name) -}}
{{- end -}}
{{- end -}}
{{- range $name := keys $env | sortAlpha }}
{{- $value := get $env $name | toString }}
{{- if $value }}
- name: {{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- end }}
{{- range $name := $v.secretEnv }}
- name: {{ $name }}
  valueFrom:
    secretKeyRef:
      name: {{ include "svc-lib.secretName" $ }}
      key: {{ $name }}
{{- end }}
{{- range $name := $v.optionalSecretEnv }}
- name: {{ $name }}
  valueFrom:
    secretKeyRef:
      name: {{ include "svc-lib.secretName" $ }}
      key: {{ $name }}
      optional: true
{{- end }}
{{- /* The Go runtime's soft memory limit tracks the container limit, so the
       GC works harder before the kernel OOM-kills the pod. */}}
- name: GOMEMLIMIT
  valueFrom:
    resourceFieldRef:
      resource: limits.memory
      divisor: "1"
{{- end -}}

{{/*
One container; argument: dict "ctx" <context> "name" <string> "args" <list>
"serving" <bool: ports, probes and preStop>.
*/}}
{{- define "svc-lib.container" -}}
{{- $v := .ctx.Values -}}
name: {{ .name }}
image: {{ include "svc-lib.image" .ctx | quote }}
imagePullPolicy: {{ $v.image.pullPolicy }}
args:
  {{- toYaml .args | nindent 2 }}
{{- if .serving }}
ports:
  - name: http
    containerPort: {{ int $v.port }}
    protocol: TCP
  # /admin/v1/, /internal/v1/ and /metrics (OPS_HTTP_ADDR): on the
  # <fullname>-ops Service only, never behind the Ingress.
  - name: ops
    containerPort: {{ int $v.opsPort }}
    protocol: TCP
{{- end }}
env:
  {{- include "svc-lib.env" .ctx | trim | nindent 2 }}
{{- if .serving }}
{{- with $v.probes }}
startupProbe:
  httpGet:
    path: {{ .startup.path }}
    port: http
  periodSeconds: {{ int .startup.periodSeconds }}
  timeoutSeconds: {{ int .startup.timeoutSeconds }}
  failureThreshold: {{ int .startup.failureThreshold }}
livenessProbe:
  httpGet:
    path: {{ .liveness.path }}
    port: http
  periodSeconds: {{ int .liveness.periodSeconds }}
  timeoutSeconds: {{ int .liveness.timeoutSeconds }}
  failureThreshold: {{ int .liveness.failureThreshold }}
readinessProbe:
  httpGet:
    path: {{ .readiness.path }}
    port: http
  periodSeconds: {{ int .readiness.periodSeconds }}
  timeoutSeconds: {{ int .readiness.timeoutSeconds }}
  failureThreshold: {{ int .readiness.failureThreshold }}
{{- end }}
{{- if gt (int $v.preStopSleepSeconds) 0 }}
lifecycle:
  preStop:
    sleep:
      seconds: {{ int $v.preStopSleepSeconds }}
{{- end }}
{{- end }}
resources:
  {{- toYaml $v.resources | nindent 2 }}
securityContext:
  {{- toYaml $v.securityContext | nindent 2 }}
volumeMounts:
  - name: tmp
    mountPath: /tmp
{{- end -}}

{{/*
Pod-level settings shared by the Deployment and the Job; argument: the context.
The services never call the Kubernetes API, so no token is mounted, and
service-link variables (FOO_SERVICE_HOST...) are off: configuration comes only
from the variables the chart sets.
*/}}
{{- define "svc-lib.podCommon" -}}
{{- $v := .Values -}}
automountServiceAccountToken: false
enableServiceLinks: false
securityContext:
  {{- toYaml $v.podSecurityContext | nindent 2 }}
{{- with (concat $v.imagePullSecrets $v.global.imagePullSecrets) }}
imagePullSecrets:
  {{- range . }}
  {{- if kindIs "string" . }}
  - name: {{ . }}
  {{- else }}
  - name: {{ .name }}
  {{- end }}
  {{- end }}
{{- end }}
{{- with $v.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
volumes:
  # The root filesystem is read-only; /tmp is the only writable path.
  - name: tmp
    emptyDir:
      sizeLimit: 64Mi
{{- end -}}
