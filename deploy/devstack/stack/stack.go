// Package stack starts the services of svc together in one process, the way
// `make run` runs them: each through platform.Start on a loopback port, on
// one database (each service in its own schema) and one broker, with the
// cross-service settings derived from which services run. The local stack
// (deploy/devstack), benchclick and the cross-service tests (through
// stacktest) all start services here, so adding a service to the stack is
// one line in Services, and one in Links if it calls another service.
package stack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/svc-dev/svc/libs/platform"
	accounts "github.com/svc-dev/svc/services/accounts/server"
	tracking "github.com/svc-dev/svc/services/tracking/server"
)

// Services is every service of the stack in start order: a service comes
// after every service whose URL it is given (see Links).
func Services() []platform.Spec {
	return []platform.Spec{
		tracking.Spec(),
		accounts.Spec(),
	}
}

// Link is one synchronous call between services: service From finds the
// base URL (http://host:port) of service To in its variable Var.
type Link struct {
	From, Var, To string
}

// Links is how the services of the stack find each other. A link whose To
// is not started (Options.Only) is left to Options.Env, so a service can be
// pointed at one running elsewhere.
func Links() []Link {
	return []Link{
		{From: accounts.Name, Var: "TRACKING_URL", To: tracking.Name},
	}
}

// Options configure Start.
type Options struct {
	// Env is the environment every service reads (DATABASE_URL,
	// KAFKA_BROKERS, ADMIN_TOKEN, ...) apart from the variables the stack
	// sets itself, whatever Env says: HTTP_ADDR (127.0.0.1:0: each service
	// on its own loopback port), DB_SCHEMA (the service's name: each its
	// own schema of the one database), CATALOG_CONSUMERS (the started
	// services with Spec.CatalogReplica) and the variables of Links to
	// started services. Nil reads nothing.
	Env func(key string) string
	// Logs returns where a service logs; nil, or a nil writer, discards.
	Logs func(service string) io.Writer
	// Only, when set, starts just these services (names from Services),
	// still in Services' order.
	Only []string
}

// Stack is a set of started services.
type Stack struct {
	names     []string
	instances map[string]*platform.Instance
	closeOnce sync.Once
	closeErr  error
}

// Start starts the services of Services (or opts.Only) in order and returns
// them running until ctx ends or Close is called. If one fails to start,
// those already started are stopped.
func Start(ctx context.Context, opts Options) (*Stack, error) {
	return start(ctx, Services(), Links(), opts)
}

func start(ctx context.Context, specs []platform.Spec, links []Link, opts Options) (_ *Stack, err error) {
	specs, err = plan(specs, links, opts.Only)
	if err != nil {
		return nil, err
	}
	var replicas []string
	for _, spec := range specs {
		if spec.CatalogReplica {
			replicas = append(replicas, spec.Name)
		}
	}
	s := &Stack{instances: make(map[string]*platform.Instance, len(specs))}
	defer func() {
		if err != nil {
			_ = s.Close()
		}
	}()
	for _, spec := range specs {
		decided := map[string]string{
			"HTTP_ADDR":         "127.0.0.1:0",
			"DB_SCHEMA":         spec.Name,
			"CATALOG_CONSUMERS": strings.Join(replicas, ","),
		}
		for _, l := range links {
			if l.From != spec.Name {
				continue
			}
			if to, ok := s.instances[l.To]; ok {
				decided[l.Var] = "http://" + to.Addr()
			}
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
			logs = opts.Logs(spec.Name)
		}
		if logs == nil {
			logs = io.Discard
		}
		inst, err := platform.Start(ctx, spec, getenv, logs)
		if err != nil {
			return nil, fmt.Errorf("start %s: %w", spec.Name, err)
		}
		s.names = append(s.names, spec.Name)
		s.instances[spec.Name] = inst
	}
	return s, nil
}

// plan returns the specs to start, in order, after checking that names are
// unique, Only names services that exist and every link's target starts
// before the service that calls it.
func plan(specs []platform.Spec, links []Link, only []string) ([]platform.Spec, error) {
	pos := make(map[string]int, len(specs))
	for i, spec := range specs {
		if spec.Name == "" {
			return nil, fmt.Errorf("stack: service %d has no name", i)
		}
		if _, dup := pos[spec.Name]; dup {
			return nil, fmt.Errorf("stack: service %s listed twice", spec.Name)
		}
		pos[spec.Name] = i
	}
	for _, l := range links {
		from, okFrom := pos[l.From]
		to, okTo := pos[l.To]
		switch {
		case !okFrom || !okTo:
			return nil, fmt.Errorf("stack: link %s %s -> %s names a service not in the stack", l.From, l.Var, l.To)
		case l.Var == "":
			return nil, fmt.Errorf("stack: link %s -> %s has no variable", l.From, l.To)
		case to >= from:
			return nil, fmt.Errorf("stack: %s must start after %s, whose URL it gets in %s", l.From, l.To, l.Var)
		}
	}
	if len(only) == 0 {
		return specs, nil
	}
	for _, name := range only {
		if _, ok := pos[name]; !ok {
			return nil, fmt.Errorf("stack: no service %q", name)
		}
	}
	out := make([]platform.Spec, 0, len(only))
	for _, spec := range specs {
		if slices.Contains(only, spec.Name) {
			out = append(out, spec)
		}
	}
	return out, nil
}

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

// Handlers are the services' handlers by name, for a gateway in the same
// process (gateway.New).
func (s *Stack) Handlers() map[string]http.Handler {
	out := make(map[string]http.Handler, len(s.instances))
	for name, inst := range s.instances {
		out[name] = inst.Handler()
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
