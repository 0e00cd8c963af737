module github.com/svc-dev/svc/services/tracking

go 1.26.0

require (
	github.com/jackc/pgx/v5 v5.12.0
	github.com/svc-dev/svc/libs/catalogsync v0.0.0
	github.com/svc-dev/svc/libs/errkind v0.0.0
	github.com/svc-dev/svc/libs/outbox v0.0.0
	github.com/svc-dev/svc/libs/pg v0.0.0
	github.com/svc-dev/svc/libs/platform v0.0.0
	github.com/svc-dev/svc/libs/ratelimit v0.0.0-00010101000000-000000000000
	github.com/svc-dev/svc/proto v0.0.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/coreos/go-oidc/v3 v3.21.0 // indirect
	github.com/go-jose/go-jose/v4 v4.1.8 // indirect
	github.com/golang-jwt/jwt/v5 v5.3.1 // indirect
	github.com/svc-dev/svc/api v0.0.0 // indirect
	github.com/svc-dev/svc/services/analytics v0.0.0-00010101000000-000000000000 // indirect
	github.com/svc-dev/svc/services/commissions v0.0.0 // indirect
	github.com/svc-dev/svc/services/webhooks v0.0.0-00010101000000-000000000000 // indirect
	github.com/twmb/franz-go v1.22.2 // indirect
	github.com/twmb/franz-go/pkg/kfake v0.0.0-20260918054303-01f206a7e32c // indirect
	github.com/twmb/franz-go/pkg/kmsg v1.15.0 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/oauth2 v0.37.0 // indirect
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cenkalti/backoff/v5 v5.0.3 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/exaring/otelpgx v0.13.0 // indirect
	github.com/felixge/httpsnoop v1.1.0 // indirect
	github.com/go-kit/kit v0.13.0
	github.com/go-kit/log v0.2.0 // indirect
	github.com/go-logfmt/logfmt v0.5.1 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/grpc-ecosystem/grpc-gateway/v2 v2.30.0 // indirect
	github.com/hashicorp/golang-lru/v2 v2.0.7
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/maxmind/mmdbwriter v1.2.0
	github.com/mfridman/interpolate v0.0.2 // indirect
	github.com/mileusna/useragent v1.3.5
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/oschwald/maxminddb-golang/v2 v2.9.0
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
	github.com/pressly/goose/v3 v3.29.0 // indirect
	github.com/prometheus/client_golang v1.25.0
	github.com/prometheus/client_model v0.6.3 // indirect
	github.com/prometheus/common v0.72.0 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	github.com/segmentio/kafka-go v0.4.51 // indirect
	github.com/sethvargo/go-retry v0.5.0 // indirect
	github.com/svc-dev/svc/deploy/devstack v0.0.0
	github.com/svc-dev/svc/libs/auth v0.0.0
	github.com/svc-dev/svc/libs/httpkit v0.0.0
	github.com/svc-dev/svc/libs/kafkakit v0.0.0 // indirect
	github.com/svc-dev/svc/libs/obs v0.0.0
	github.com/svc-dev/svc/services/accounts v0.0.0
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp v0.72.0 // indirect
	go.opentelemetry.io/otel v1.47.0 // indirect
	go.opentelemetry.io/otel/exporters/otlp/otlptrace v1.47.0 // indirect
	go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp v1.47.0 // indirect
	go.opentelemetry.io/otel/log v1.47.0 // indirect
	go.opentelemetry.io/otel/metric v1.47.0 // indirect
	go.opentelemetry.io/otel/sdk v1.47.0 // indirect
	go.opentelemetry.io/otel/trace v1.47.0 // indirect
	go.opentelemetry.io/proto/otlp v1.11.0 // indirect
	go.uber.org/multierr v1.11.0 // indirect
	go4.org/netipx v0.0.0-20231129151722-fdeea329fbba // indirect
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20261005182115-fad411399dd8 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261005182115-fad411399dd8 // indirect
	google.golang.org/grpc v1.84.0 // indirect
)

replace (
	github.com/svc-dev/svc/api => ../../api
	github.com/svc-dev/svc/deploy/devstack => ../../deploy/devstack
	github.com/svc-dev/svc/libs/auth => ../../libs/auth
	github.com/svc-dev/svc/libs/catalogsync => ../../libs/catalogsync
	github.com/svc-dev/svc/libs/errkind => ../../libs/errkind
	github.com/svc-dev/svc/libs/httpkit => ../../libs/httpkit
	github.com/svc-dev/svc/libs/kafkakit => ../../libs/kafkakit
	github.com/svc-dev/svc/libs/obs => ../../libs/obs
	github.com/svc-dev/svc/libs/outbox => ../../libs/outbox
	github.com/svc-dev/svc/libs/pg => ../../libs/pg
	github.com/svc-dev/svc/libs/platform => ../../libs/platform
	github.com/svc-dev/svc/libs/ratelimit => ../../libs/ratelimit
	github.com/svc-dev/svc/proto => ../../proto
	github.com/svc-dev/svc/services/analytics => ../analytics
	github.com/svc-dev/svc/services/commissions => ../commissions
	github.com/svc-dev/svc/services/webhooks => ../webhooks
)

replace github.com/svc-dev/svc/services/accounts => ../accounts
