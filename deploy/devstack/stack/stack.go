// Package stack starts the services of svc together in one process, the way
// `make run` runs them: each through platform.Start on a loopback port, on
// one database (each service in its own schema) and one broker, with the
// cross-service settings derived from which services run. The local stack
// (deploy/devstack), benchclick and the cross-service tests (through
// stacktest) all start services here, so adding a service to the stack is
// one line in Services.
package stack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/svc-dev/svc/deploy/devstack/gateway"
	"github.com/svc-dev/svc/libs/platform"
	accounts "github.com/svc-dev/svc/services/accounts/server"
	analytics "github.com/svc-dev/svc/services/analytics/server"
	commissions "github.com/svc-dev/svc/services/commissions/server"
	tracking "github.com/svc-dev/svc/services/tracking/server"
	webhooks "github.com/svc-dev/svc/services/webhooks/server"
)

// Service is one service of the stack and what the others need to know of
// it.
type Service struct {
	Spec platform.Spec
	// CatalogReplica services keep a copy of accounts' catalog: accounts'
	// sync barrier waits for them (CATALOG_CONSUMERS lists those started).
	// The stack knows this, not the Spec: the platform knows no product.
	CatalogReplica bool
	// URLs are the services this one calls: its variable -> the name of the
	// called service, whose base URL (http://host:port) it gets. A called
	// service starts first; one not started (Options.Only) leaves the
	// variable to Options.Env, so it can point at a service running
	// elsewhere.
	URLs map[string]string
	// InternalURLs are like URLs, but the variable gets the called
	// service's operations URL (platform.Instance.OpsAddr), where its
	// /internal/ routes are served when OPS_HTTP_ADDR splits them from the
	// public port (the same URL as URLs' otherwise).
	InternalURLs map[string]string
}

// Services is every service of the stack in start order, one line each.
func Services() []Service {
	return []Service{
		{Spec: tracking.Spec(), CatalogReplica: true},
		// Commissions asks tracking's /internal/v1/attributions.
		{Spec: commissions.Spec(), CatalogReplica: true, InternalURLs: map[string]string{"TRACKING_URL": tracking.Name}},
		{Spec: analytics.Spec(), CatalogReplica: true},
		// Test events: click and lead at tracking, the sale at commissions.
		// The console's partners list asks analytics' internal figures.
		{Spec: accounts.Spec(), URLs: map[string]string{"TRACKING_URL": tracking.Name, "COMMISSIONS_URL": commissions.Name},
			InternalURLs: map[string]string{"ANALYTICS_URL": analytics.Name}},
		// Outgoing webhooks: the ledger's and tracking's events to brands;
		// `svc listen` asks accounts' internal route about login tokens.
		{Spec: webhooks.Spec(), CatalogReplica: true, InternalURLs: map[string]string{"ACCOUNTS_URL": accounts.Name}},
	}
}

// Options configure Start.
type Options struct {
	// Env is the environment every service reads (DATABASE_URL,
	// KAFKA_BROKERS, ADMIN_TOKEN, ...) apart from the variables the stack
	// sets itself, whatever Env says: HTTP_ADDR (127.0.0.1:0: each service
	// on its own loopback port), DB_SCHEMA (the service's name: each its
	// own schema of the one database), CATALOG_CONSUMERS (the started
	// services with CatalogReplica) and the URLs of started services
	// (Service.URLs and InternalURLs). Nil reads nothing. OPS_HTTP_ADDR
	// comes from Env: "127.0.0.1:0" gives every service an operations
	// port of its own, as in the cluster (the local stack's choice); unset,
	// one port serves everything (most tests).
	Env func(key string) string
	// Logs returns where a service logs; nil, or a nil writer, discards.
	Logs func(service string) io.Writer
	// Only, when set, starts just these services (names from Services),
	// still in Services' order.
	Only []string
	// Elsewhere names services of the stack (of Only, when set) that run
	// outside it, in processes of their own the caller starts (a drill
	// kills one): they are not started here, but the others are wired as
	// if they ran beside them (CATALOG_CONSUMERS lists those with
	// CatalogReplica, so accounts' barrier waits for them too), and Wiring
	// gives the variables the stack would have set for each. A service
	// calling one of them gets its URL from Env, as with Only.
	Elsewhere []string
	// Platform options every service starts with (platform.WithClock: the
	// whole stack on one injected clock).
	Platform []platform.Option
}

// Stack is a set of started services.
type Stack struct {
	names     []string
	instances map[string]*platform.Instance
	// wiring is what the stack set itself for each service, started or
	// elsewhere.
	wiring    map[string]map[string]string
	closeOnce sync.Once
	closeErr  error
}

// Start starts the services of Services (or opts.Only) in order and returns
// them running until ctx ends or Close is called. If one fails to start,
// those already started are stopped.
func Start(ctx context.Context, opts Options) (*Stack, error) {
	return start(ctx, Services(), opts)
}

func start(ctx context.Context, services []Service, opts Options) (_ *Stack, err error) {
	services, err = plan(services, opts.Only)
	if err != nil {
		return nil, err
	}
	for _, name := range opts.Elsewhere {
		if !slices.ContainsFunc(services, func(svc Service) bool { return svc.Spec.Name == name }) {
			return nil, fmt.Errorf("stack: Elsewhere names %q, which is not a service of the stack (or Only leaves it out)", name)
		}
	}
	var replicas []string
	for _, svc := range services {
		if svc.CatalogReplica {
			replicas = append(replicas, svc.Spec.Name)
		}
	}
	s := &Stack{instances: make(map[string]*platform.Instance, len(services)), wiring: make(map[string]map[string]string, len(services))}
	defer func() {
		if err != nil {
			_ = s.Close()
		}
	}()
	for _, svc := range services {
		name := svc.Spec.Name
		decided := map[string]string{
			"HTTP_ADDR":         "127.0.0.1:0",
			"DB_SCHEMA":         name,
			"CATALOG_CONSUMERS": strings.Join(replicas, ","),
		}
		for key, callee := range svc.URLs {
			if inst, ok := s.instances[callee]; ok {
				decided[key] = "http://" + inst.Addr()
			}
		}
		for key, callee := range svc.InternalURLs {
			if inst, ok := s.instances[callee]; ok {
				decided[key] = "http://" + inst.OpsAddr()
			}
		}
		s.wiring[name] = decided
		if slices.Contains(opts.Elsewhere, name) {
			continue
		}
		getenv := func(k string) string {
			if v, ok := decided[k]; ok {
				return v
			}
			if opts.Env == nil {
				return ""
			}
			return opts.Env(k)
		}
		var logs io.Writer
		if opts.Logs != nil {
			logs = opts.Logs(name)
		}
		if logs == nil {
			logs = io.Discard
		}
		inst, err := platform.Start(ctx, svc.Spec, getenv, logs, opts.Platform...)
		if err != nil {
			return nil, fmt.Errorf("start %s: %w", name, err)
		}
		s.names = append(s.names, name)
		s.instances[name] = inst
	}
	return s, nil
}

// plan returns the services to start, in order, after checking that names
// are unique, every called service starts before its caller and Only names
// services that exist.
func plan(services []Service, only []string) ([]Service, error) {
	pos := make(map[string]int, len(services))
	for i, svc := range services {
		name := svc.Spec.Name
		if name == "" {
			return nil, fmt.Errorf("stack: service %d has no name", i)
		}
		if _, dup := pos[name]; dup {
			return nil, fmt.Errorf("stack: service %s listed twice", name)
		}
		for key, callee := range svc.calls() {
			switch _, before := pos[callee]; {
			case key == "":
				return nil, fmt.Errorf("stack: %s gets the URL of %s in no variable", name, callee)
			case !before && !slices.ContainsFunc(services, func(o Service) bool { return o.Spec.Name == callee }):
				return nil, fmt.Errorf("stack: %s calls %s (%s), which is not in the stack", name, callee, key)
			case !before:
				return nil, fmt.Errorf("stack: %s must start after %s, whose URL it gets in %s", name, callee, key)
			}
		}
		pos[name] = i
	}
	if len(only) == 0 {
		return services, nil
	}
	for _, name := range only {
		if _, ok := pos[name]; !ok {
			return nil, fmt.Errorf("stack: no service %q", name)
		}
	}
	out := make([]Service, 0, len(only))
	for _, svc := range services {
		if slices.Contains(only, svc.Spec.Name) {
			out = append(out, svc)
		}
	}
	return out, nil
}

// calls are the variables of URLs and InternalURLs, each with the service
// it names.
func (svc Service) calls() map[string]string {
	out := make(map[string]string, len(svc.URLs)+len(svc.InternalURLs))
	for _, m := range []map[string]string{svc.URLs, svc.InternalURLs} {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// Wiring is what the stack sets itself for service name, started here or
// Elsewhere (HTTP_ADDR, DB_SCHEMA, CATALOG_CONSUMERS and the URLs of the
// services it calls), or nil for a service not in the stack: with Env's
// variables beneath, the environment the service runs with.
func (s *Stack) Wiring(name string) map[string]string { return maps.Clone(s.wiring[name]) }

// Names are the started services in start order.
func (s *Stack) Names() []string { return slices.Clone(s.names) }

// Instance is the started service name, or nil.
func (s *Stack) Instance(name string) *platform.Instance { return s.instances[name] }

// URL is the base URL of the started service name (http://127.0.0.1:port),
// or "" if it is not running.
func (s *Stack) URL(name string) string {
	inst := s.instances[name]
	if inst == nil {
		return ""
	}
	return "http://" + inst.Addr()
}

// OpsURL is the base URL of the started service's operations port (its
// admin, internal and metrics routes; the same as URL when OPS_HTTP_ADDR is
// unset), or "" if it is not running.
func (s *Stack) OpsURL(name string) string {
	inst := s.instances[name]
	if inst == nil {
		return ""
	}
	return "http://" + inst.OpsAddr()
}

// Handlers are the services' handlers by name, for a gateway in the same
// process (gateway.New): each a gateway.Ports of what its public and its
// operations listener serve, so the gateway's admin rules reach the
// operations side as they do in the cluster.
func (s *Stack) Handlers() map[string]http.Handler {
	out := make(map[string]http.Handler, len(s.instances))
	for name, inst := range s.instances {
		out[name] = gateway.Ports{Public: inst.Handler(), Ops: inst.OpsHandler()}
	}
	return out
}

// Close stops the services gracefully in reverse start order and returns
// what they stopped with. Calling it again returns the same.
func (s *Stack) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		for i := len(s.names) - 1; i >= 0; i-- {
			if err := s.instances[s.names[i]].Stop(); err != nil {
				errs = append(errs, fmt.Errorf("stop %s: %w", s.names[i], err))
			}
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}
