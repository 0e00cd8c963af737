{{/*
Schema migration as a Helm hook: runs "<binary> migrate" before the new pods
are created on install and on every upgrade; a failed migration fails the
release and leaves the running version untouched. before-hook-creation keeps
a failed Job (and its logs) until the next attempt.
*/}}
{{- define "svc-lib.migrationJob" -}}
{{- if include "svc-lib.migrationHook" . -}}
{{- $v := .Values -}}
{{- $mig := dict "ctx" . "component" "migration" -}}
apiVersion: batch/v1
kind: Job
metadata:
  name: {{ printf "%s-migrate" (include "svc-lib.fullname" . | trunc 55 | trimSuffix "-") }}
  labels:
    {{- include "svc-lib.labels" $mig | nindent 4 }}
  annotations:
    helm.sh/hook: pre-install,pre-upgrade
    helm.sh/hook-weight: "0"
    helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded
spec:
  backoffLimit: {{ int $v.migration.backoffLimit }}
  activeDeadlineSeconds: {{ int $v.migration.activeDeadlineSeconds }}
  template:
    metadata:
      labels:
        {{- include "svc-lib.labels" $mig | nindent 8 }}
    spec:
      restartPolicy: Never
      {{- include "svc-lib.podCommon" . | nindent 6 }}
      containers:
        - {{ include "svc-lib.container" (dict "ctx" . "name" "migrate" "args" $v.migration.args "serving" false) | indent 10 | trim }}
{{- end -}}
{{- end -}}
