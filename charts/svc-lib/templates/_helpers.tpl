{{/* Name of the service (app.kubernetes.io/name). */}}
{{- define "svc-lib.name" -}}
{{- default .Values.serviceName .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Full name of the service's objects: <release>-<service>, or the release name
when it already contains the service name. The umbrella chart calls it with
(dict "Values" <service values> "Release" .Release) to name Ingress backends,
so it must read nothing else.
*/}}
{{- define "svc-lib.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Values.serviceName .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Selector labels; argument: dict "ctx" <context> "component" <api|migration>. */}}
{{- define "svc-lib.selectorLabels" -}}
app.kubernetes.io/name: {{ include "svc-lib.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* All labels; argument: dict "ctx" <context> "component" <api|migration>. */}}
{{- define "svc-lib.labels" -}}
{{ include "svc-lib.selectorLabels" . }}
app.kubernetes.io/part-of: svc
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/version: {{ (include "svc-lib.imageTag" .ctx) | trunc 63 | trimSuffix "-" | quote }}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{- define "svc-lib.imageTag" -}}
{{- $tag := .Values.image.tag | default .Values.global.image.tag | default .Chart.AppVersion | toString -}}
{{- /* skaffold passes "<tag>@<digest>"; the label keeps the tag part only. */ -}}
{{- regexReplaceAll "[^A-Za-z0-9._-]" (first (splitList "@" $tag)) "_" -}}
{{- end -}}

{{/* Image reference: [registry/]repository(:tag|@digest). */}}
{{- define "svc-lib.image" -}}
{{- $registry := .Values.image.registry | default .Values.global.image.registry -}}
{{- $repository := .Values.image.repository | default (printf "svc-%s" .Values.serviceName) -}}
{{- $ref := $repository -}}
{{- if $registry -}}
{{- $ref = printf "%s/%s" (trimSuffix "/" $registry) $repository -}}
{{- end -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $ref .Values.image.digest -}}
{{- else -}}
{{- $tag := .Values.image.tag | default .Values.global.image.tag | default .Chart.AppVersion | toString -}}
{{- if not $tag -}}
{{- fail (printf "svc-lib: no image tag for %s: set image.tag, global.image.tag or the chart's appVersion" .Values.serviceName) -}}
{{- end -}}
{{- printf "%s:%s" $ref $tag -}}
{{- end -}}
{{- end -}}

{{/* Name of the Secret holding the secretEnv variables. */}}
{{- define "svc-lib.secretName" -}}
{{- .Values.secret.existingSecret | default (include "svc-lib.fullname" .) -}}
{{- end -}}

{{/* True ("true") when migrations run as a Helm hook Job. */}}
{{- define "svc-lib.migrationHook" -}}
{{- if and .Values.migration.enabled (eq .Values.migration.mode "hook") -}}true{{- end -}}
{{- end -}}
