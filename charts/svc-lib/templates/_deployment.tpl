{{- define "svc-lib.deployment" -}}
{{- $v := .Values -}}
{{- $api := dict "ctx" . "component" "api" -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "svc-lib.fullname" . }}
  labels:
    {{- include "svc-lib.labels" $api | nindent 4 }}
spec:
  {{- if not $v.autoscaling.enabled }}
  replicas: {{ int $v.replicaCount }}
  {{- end }}
  revisionHistoryLimit: 5
  # Surge first: capacity never drops below the desired count during a rollout.
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxSurge: 1
      maxUnavailable: 0
  selector:
    matchLabels:
      {{- include "svc-lib.selectorLabels" $api | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "svc-lib.labels" $api | nindent 8 }}
        {{- with $v.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- $annotations := deepCopy $v.podAnnotations }}
      {{- if $v.secret.create }}
      {{- /* Secret values are read at start: roll the pods when they change. */}}
      {{- $_ := set $annotations "checksum/secret" (toJson $v.secret.data | sha256sum) }}
      {{- end }}
      {{- with $annotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      {{- include "svc-lib.podCommon" . | nindent 6 }}
      terminationGracePeriodSeconds: {{ int $v.terminationGracePeriodSeconds }}
      {{- if $v.topologySpread }}
      topologySpreadConstraints:
        - maxSkew: 1
          topologyKey: kubernetes.io/hostname
          whenUnsatisfiable: ScheduleAnyway
          labelSelector:
            matchLabels:
              {{- include "svc-lib.selectorLabels" $api | nindent 14 }}
        - maxSkew: 1
          topologyKey: topology.kubernetes.io/zone
          whenUnsatisfiable: ScheduleAnyway
          labelSelector:
            matchLabels:
              {{- include "svc-lib.selectorLabels" $api | nindent 14 }}
      {{- end }}
      {{- if and $v.migration.enabled (eq $v.migration.mode "initContainer") }}
      initContainers:
        - {{ include "svc-lib.container" (dict "ctx" . "name" "migrate" "args" $v.migration.args "serving" false) | indent 10 | trim }}
      {{- end }}
      containers:
        - {{ include "svc-lib.container" (dict "ctx" . "name" $v.serviceName "args" $v.args "serving" true) | indent 10 | trim }}
{{- end -}}
