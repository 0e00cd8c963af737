{{/*
Defaults of every service chart. A service chart's values.yaml (and the
umbrella's block for that service) override them key by key; lists are
replaced, not appended. Kept here rather than in each service chart so a new
service is one short values.yaml.
*/}}
{{- define "svc-lib.defaults" -}}
# Service name: binary, DB schema, OTEL_SERVICE_NAME and the
# app.kubernetes.io/name label. Required.
serviceName: ""
nameOverride: ""
# true for services consuming accounts.catalog.v1 and acknowledging on
# catalog.applied.v1 (tracking, commissions). Renders nothing: the umbrella
# checks that accounts' CATALOG_CONSUMERS lists exactly the enabled ones.
catalogReplica: false
fullnameOverride: ""

image:
  # Empty registry: repository is used as is (skaffold passes a full repository).
  registry: ""
  # Empty: svc-<service>.
  repository: ""
  # Empty: global.image.tag, then the chart's appVersion.
  tag: ""
  # When set, the image is pinned by digest and tag is ignored.
  digest: ""
  pullPolicy: IfNotPresent

replicaCount: 2
# Container port; HTTP_ADDR is ":<port>". The public API, /healthz and
# /readyz are served on it; it is the only port of the Service <fullname>,
# the Ingress's backend.
port: 8080
# Operations port; OPS_HTTP_ADDR is ":<opsPort>". The admin API
# (/admin/v1/), the service-to-service routes (/internal/v1/) and /metrics
# are served there only (the public port answers them 404), on the Service
# <fullname>-ops, which no Ingress routes to. The probes answer on both.
opsPort: 9090
args: [serve]

# DB_SCHEMA; empty means the service name.
dbSchema: ""
# Per-service overrides of the global settings of the same name.
logLevel: ""
kafkaBrokers: ""
trustedProxies: ""
otelEndpoint: ""

# Extra plain environment variables. Values go through tpl, so a value may be
# a template reading other values (e.g. .Values.global.sessionPublicKey, see
# charts/tracking/values.yaml). Empty values are left out. They override the computed ones (HTTP_ADDR, LOG_LEVEL, ...).
env: {}
# Environment variables that must be non-empty after rendering.
requiredEnv: []
# Environment variables read from the service's Secret; the key in the Secret
# is the variable's name.
secretEnv: [DATABASE_URL]
# Like secretEnv, but the key may be missing from the Secret: the variable is
# then unset and the pod still starts. For features a service turns on only
# when configured (commissions' PROCESSOR_WEBHOOK_SECRET).
optionalSecretEnv: []
secret:
  # Name of a Secret created outside the chart (production: External Secrets,
  # sealed secrets, ...). Empty: the chart's own name (<fullname>).
  existingSecret: ""
  # Render the Secret from data below. For local development only: the values
  # end up in the Helm release, which anyone reading the release can see.
  create: false
  data: {}

resources:
  requests:
    cpu: 100m
    memory: 128Mi
  limits:
    cpu: "1"
    # Required: GOMEMLIMIT is derived from it.
    memory: 256Mi

podSecurityContext:
  runAsNonRoot: true
  # distroless "nonroot"; numeric so the kubelet can verify runAsNonRoot.
  runAsUser: 65532
  runAsGroup: 65532
  fsGroup: 65532
  seccompProfile:
    type: RuntimeDefault
securityContext:
  runAsNonRoot: true
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  privileged: false
  capabilities:
    drop: [ALL]
  seccompProfile:
    type: RuntimeDefault

probes:
  startup:
    path: /healthz
    periodSeconds: 2
    timeoutSeconds: 2
    failureThreshold: 30
  liveness:
    path: /healthz
    periodSeconds: 10
    timeoutSeconds: 2
    failureThreshold: 3
  readiness:
    path: /readyz
    periodSeconds: 5
    timeoutSeconds: 3
    failureThreshold: 2

# Endpoints are removed asynchronously from kube-proxy and ingress
# controllers; sleeping before SIGTERM lets in-flight routing settle so a
# rolling update drops no request. Needs Kubernetes >= 1.30 (sleep action);
# 0 disables it.
preStopSleepSeconds: 5
terminationGracePeriodSeconds: 30

migration:
  enabled: true
  # hook: a Helm pre-install/pre-upgrade Job (the release waits for it and
  #       fails if it fails); the database must exist before the release.
  # initContainer: every pod migrates before serving (safe: migrations take a
  #       Postgres lock); for stacks that install the database in the same release.
  mode: hook
  args: [migrate]
  backoffLimit: 2
  activeDeadlineSeconds: 600

service:
  type: ClusterIP
  port: 8080
  annotations: {}

serviceMonitor:
  # auto: only when the cluster serves monitoring.coreos.com/v1 ServiceMonitor.
  enabled: auto
  interval: 30s
  scrapeTimeout: 10s
  labels: {}

pdb:
  enabled: true
  maxUnavailable: 1

autoscaling:
  enabled: false
  minReplicas: 2
  maxReplicas: 6
  targetCPUUtilizationPercentage: 70
  # Leave empty to scale on CPU only.
  targetMemoryUtilizationPercentage: ""

networkPolicy:
  # Services of this release whose pods call this one's public port (the
  # callee's chart names them: accounts' CLI test events call tracking and
  # commissions). The ingress controller is global.networkPolicy's.
  publicCallers: []
  # Services of this release whose pods call this one's /internal/v1/
  # routes on its operations port (tracking: commissions, for attributions).
  internalCallers: []

topologySpread: true
podAnnotations: {}
podLabels: {}
imagePullSecrets: []
nodeSelector: {}
tolerations: []
affinity: {}

global:
  image:
    registry: ""
    tag: ""
  imagePullSecrets: []
  logLevel: info
  # Comma-separated host:port list. Required.
  kafkaBrokers: ""
  # Replication of the topics the services create; empty: the services'
  # defaults (3 replicas, min.insync.replicas 2). A one-broker cluster
  # (the local profile's) needs 1 and 1.
  kafkaReplicationFactor: ""
  kafkaMinInsyncReplicas: ""
  # CIDRs of the proxies in front of the services (the ingress controller's
  # pods), comma-separated. X-Forwarded-For is believed only from them.
  # Empty: nothing is trusted (the services' default, their own loopback),
  # and every client is its TCP peer; charts/README.md says how to set it.
  trustedProxies: ""
  # One NetworkPolicy per service (svc-lib.networkPolicy): its pods accept
  # nothing but what is listed here and in networkPolicy above. Each list is
  # NetworkPolicy peers (podSelector / namespaceSelector); an empty list
  # admits no one.
  networkPolicy:
    enabled: true
    # To the public port: the ingress controller's pods.
    ingressController:
      - namespaceSelector:
          matchLabels: {kubernetes.io/metadata.name: ingress-nginx}
        podSelector:
          matchLabels: {app.kubernetes.io/name: ingress-nginx, app.kubernetes.io/component: controller}
    # To the operations port (/metrics): Prometheus.
    prometheus:
      - namespaceSelector:
          matchLabels: {kubernetes.io/metadata.name: monitoring}
        podSelector:
          matchLabels: {app.kubernetes.io/name: prometheus}
    # To the operations port (/admin/v1/): any pod of a namespace labelled
    # as the operators' (kubectl label namespace ops svc.dev/operations=true).
    operations:
      - namespaceSelector:
          matchLabels: {svc.dev/operations: "true"}
  # OTLP/HTTP endpoint; empty turns tracing off.
  otelEndpoint: ""
  # base64 Ed25519 public key verifying dashboard session tokens.
  sessionPublicKey: ""
{{- end -}}
