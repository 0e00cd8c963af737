# svc: referral attribution service. `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

GO        ?= go
MODULES   := $(shell $(GO) list -m -f '{{.Path}}' 2>/dev/null)
MODDIRS   := $(shell $(GO) list -m -f '{{.Dir}}' 2>/dev/null)
PKGS      := $(addsuffix /...,$(MODULES))
BIN       := bin
SERVICES  := accounts tracking commissions analytics webhooks
GOTESTFLAGS ?= -race -count=1 -timeout=20m
# Images are $(REGISTRY)/svc-<service>:$(TAG), the names the charts derive
# (charts/svc-lib, "svc-lib.image") and the production values example uses;
# TAG defaults to the umbrella chart's appVersion, the tag a chart pulls when
# none is set. charts/lint.sh checks the charts, the example and skaffold.yaml
# use exactly the names `make image-refs` prints.
REGISTRY  ?= ghcr.io/svc-dev
TAG       ?= $(shell sed -n 's/^appVersion: *"*\([^"]*\)"*$$/\1/p' charts/svc/Chart.yaml)
PLATFORMS ?=

export TEST_DATABASE_URL ?= postgres://postgres@localhost:5432/postgres?sslmode=disable

.PHONY: help
help: ## List the targets
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk -v tty=$$([ -t 1 ] && echo 1 || echo 0) \
	  'BEGIN{FS=":.*?## "} {n[NR]=$$1; d[NR]=$$2; if (length($$1)>w) w=length($$1)} \
	   END{c=tty?"\033[36m":""; r=tty?"\033[0m":""; for(i=1;i<=NR;i++) printf "  %s%-*s%s  %s\n", c, w, n[i], r, d[i]}'

.PHONY: run
# The stack runs as a built binary, not under `go run`: go run exits 1 on
# Ctrl-C whatever the program did, and make would report a clean stop as
# an error. The binary's own exit status reaches make.
run: ## Run the whole stack on this machine (gateway on 127.0.0.1:8080)
	@mkdir -p $(BIN) && $(GO) build -o $(BIN)/devstack ./deploy/devstack
	@exec $(BIN)/devstack run

.PHONY: seed
seed: ## Load the demo catalog into a running stack (deploy/seed/demo.json)
	@mkdir -p $(BIN) && $(GO) build -o $(BIN)/devstack ./deploy/devstack
	@exec $(BIN)/devstack seed

.PHONY: cli
# A binary, not `go run`: go run exits 1 whenever the program exits
# non-zero, so the client's documented exit codes (2 usage, 3 sign-in, ...)
# would all reach a script as 1.
cli: ## Build the command-line client into bin/svc (run it as bin/svc)
	@mkdir -p $(BIN) && $(GO) build -o $(BIN)/svc ./cli/cmd/svc && echo "built $(BIN)/svc"

.PHONY: build
build: ## Build every service binary into bin/
	@mkdir -p $(BIN)
	@for s in $(SERVICES); do echo "build $$s"; CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/$$s ./services/$$s/cmd/$$s || exit 1; done

.PHONY: images
images: ## Build the service images <registry>/svc-<service>:<tag> with docker buildx (REGISTRY=ghcr.io/svc-dev, TAG=the charts' appVersion; PUSH=1 pushes)
	@for s in $(SERVICES); do ref="$(if $(REGISTRY),$(REGISTRY)/)svc-$$s:$(TAG)"; echo "image $$ref"; \
	  docker buildx build -f docker/Dockerfile --build-arg SERVICE=$$s -t "$$ref" \
	    $(if $(PLATFORMS),--platform $(PLATFORMS)) $(if $(PUSH),--push) . || exit 1; done

.PHONY: image-refs
image-refs: ## Print the image references `make images` builds, one a line
	@for s in $(SERVICES); do echo "$(if $(REGISTRY),$(REGISTRY)/)svc-$$s:$(TAG)"; done

BROWSERTESTS := services/tracking/browsertest services/analytics/browsertest

.PHONY: test-deps
test-deps: ## Install what the tests need but Go does not bring (protoc, Chromium, Node packages)
	@need=""; command -v protoc >/dev/null || need="$$need protobuf-compiler"; \
	  [ -x /usr/bin/chromium ] || need="$$need chromium"; \
	  command -v npm >/dev/null || need="$$need nodejs npm"; \
	  if [ -n "$$need" ]; then \
	    if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	      echo "installing:$$need"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$need >/dev/null; \
	    else echo "missing:$$need (install them with apt-get)"; exit 1; fi; \
	  fi
	@# npm ci again whenever a pinned package (playwright-core, axe-core, …) is missing or at another version.
	@for d in $(BROWSERTESTS); do [ ! -f $$d/package.json ] || \
	  node -e 'const d=process.argv[1], p=require("./"+d+"/package.json"); for (const k in p.dependencies) if (require("./"+d+"/node_modules/"+k+"/package.json").version !== p.dependencies[k]) process.exit(1)' $$d 2>/dev/null || \
	  { echo "npm ci in $$d"; npm ci --prefix $$d --no-audit --no-fund --silent; } || exit 1; done

.PHONY: test
test: test-deps ## Run every unit and integration test (real Postgres, embedded Kafka broker, real Chromium)
	@echo "testing $(words $(MODULES)) modules against $${TEST_DATABASE_URL%%\?*}"
	$(GO) test $(GOTESTFLAGS) $(PKGS)

.PHONY: soak
soak: ## Soak the whole stack: 10 min of mixed traffic through the gateway, broker restarted twice; heap and goroutines must end flat (SOAK_DURATION to change)
	SOAK_DURATION=$${SOAK_DURATION:-10m} $(GO) test -count=1 -v -timeout 40m -run '^TestSoak$$' ./deploy/devstack/drills/

.PHONY: bench
bench: ## Run the Go benchmarks of the limiter and the outbox relay
	$(GO) test -run='^$$' -bench=. -benchmem -count=1 github.com/svc-dev/svc/libs/ratelimit/... github.com/svc-dev/svc/libs/outbox/...

.PHONY: lint
lint: ## go vet + staticcheck on every module
	$(GO) vet $(PKGS)
	@command -v staticcheck >/dev/null || $(GO) install honnef.co/go/tools/cmd/staticcheck@latest
	staticcheck $(PKGS)

.PHONY: proto
proto: ## Regenerate the committed protobuf Go code
	cd proto && ./gen.sh

.PHONY: helm-lint
helm-lint: ## Lint and render the Helm charts, strictly decoding the manifests
	bash charts/lint.sh

.PHONY: tidy
tidy: ## go mod tidy in every module
	@for d in $(MODDIRS); do (cd $$d && $(GO) mod tidy) || exit 1; done

.PHONY: standalone
standalone: ## Check every module builds on its own (GOWORK=off)
	@for d in $(MODDIRS); do echo "build $$d"; (cd $$d && GOWORK=off $(GO) build ./...) || exit 1; done

.PHONY: bench-tracking
bench-tracking: ## Load-test POST /api/v1/track/click next to a bare net/http+pgx reference (BENCH_FLAGS="-duration=20s -connections=64")
	$(GO) run ./bench/cmd/benchclick $(BENCH_FLAGS)

.PHONY: bench-perf
bench-perf: ## Time GET /api/tracking/performance (period=all, 90d) over two years and 10M seeded clicks next to a raw-click GROUP BY reference (BENCH_FLAGS="-requests=400 -concurrency=8")
	$(GO) run ./bench/cmd/benchperf $(BENCH_FLAGS)

.PHONY: bench-lag
bench-lag: ## Lag from a click's 200 to the performance route counting it, clicks at a fixed rate through the gateway (BENCH_FLAGS="-rate=2000 -duration=30s")
	$(GO) run ./bench/cmd/benchperf lag $(BENCH_FLAGS)

.PHONY: bench-console
bench-console: ## Time the console's partners, commissions and payouts lists (10,000 partners, 1,000,000 commissions, 8 clients) next to one bare keyset query each (BENCH_FLAGS="-duration=10s -clients=8")
	$(GO) run ./bench/cmd/benchconsole $(BENCH_FLAGS)

.PHONY: bench-webhooks
bench-webhooks: ## Deliver sales published at 500/s for 60 s to 1,000 webhook endpoints (local receiver) and time the lag, next to a bare net/http client posting the same bodies (BENCH_FLAGS="-rate=500 -duration=60s -endpoints=1000")
	$(GO) run ./bench/cmd/benchwebhooks $(BENCH_FLAGS)

.PHONY: bench-sale
bench-sale: ## Load-test POST /api/v1/track/sale and /refund through the gateway next to a bare net/http+pgx reference (BENCH_FLAGS="-duration=20s -connections=32")
	$(GO) run ./bench/cmd/benchsale $(BENCH_FLAGS)
