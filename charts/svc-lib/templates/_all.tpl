{{/*
svc-lib.all: every object of one service. A service chart's only template is
  {{ include "svc-lib.all" . }}

The templates below render with a context whose .Values are the library
defaults (svc-lib.defaults) merged with the chart's values, so a service
chart states only what differs.
*/}}
{{- define "svc-lib.all" -}}
{{- $defaults := fromYaml (include "svc-lib.defaults" .) -}}
{{- if hasKey $defaults "Error" -}}
{{- fail (printf "svc-lib: defaults do not parse: %s" $defaults.Error) -}}
{{- end -}}
{{- $values := mustMergeOverwrite $defaults (deepCopy .Values) -}}
{{- if not $values.serviceName -}}
{{- fail "svc-lib: .Values.serviceName (the service name) is required" -}}
{{- end -}}
{{- $ctx := dict "Values" $values "Release" .Release "Chart" .Chart "Capabilities" .Capabilities "Template" .Template "Files" .Files -}}
{{- include "svc-lib.validate" $ctx }}
{{- $docs := list
      (include "svc-lib.secret" $ctx)
      (include "svc-lib.migrationJob" $ctx)
      (include "svc-lib.deployment" $ctx)
      (include "svc-lib.service" $ctx)
      (include "svc-lib.opsService" $ctx)
      (include "svc-lib.networkPolicy" $ctx)
      (include "svc-lib.serviceMonitor" $ctx)
      (include "svc-lib.pdb" $ctx)
      (include "svc-lib.hpa" $ctx) -}}
{{- range $docs }}
{{- if trim . }}
---
{{ trim . }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Checks that need the merged values; they fail the render with a clear message. */}}
{{- define "svc-lib.validate" -}}
{{- $v := .Values -}}
{{- if not (has $v.migration.mode (list "hook" "initContainer")) -}}
{{- fail (printf "svc-lib: migration.mode must be hook or initContainer, got %q" (toString $v.migration.mode)) -}}
{{- end -}}
{{- if not (dig "limits" "memory" "" $v.resources) -}}
{{- fail (printf "svc-lib: %s: resources.limits.memory is required (GOMEMLIMIT is derived from it)" $v.serviceName) -}}
{{- end -}}
{{- if not ($v.kafkaBrokers | default $v.global.kafkaBrokers) -}}
{{- fail (printf "svc-lib: %s: global.kafkaBrokers (or kafkaBrokers) is required" $v.serviceName) -}}
{{- end -}}
{{- if eq (int $v.port) (int $v.opsPort) -}}
{{- fail (printf "svc-lib: %s: opsPort must differ from port (%d): the operations routes need a port of their own" $v.serviceName (int $v.port)) -}}
{{- end -}}
{{- if and $v.secret.create $v.secret.existingSecret -}}
{{- fail (printf "svc-lib: %s: secret.create and secret.existingSecret are exclusive" $v.serviceName) -}}
{{- end -}}
{{- end -}}
