// Package stacktest runs the stack in a test: the services of
// stack.Services in-process on a fresh database and an embedded broker
// (platformtest.Env), stopped when the test ends.
package stacktest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"testing"

	"github.com/svc-dev/svc/deploy/devstack/stack"
	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/libs/platform/platformtest"
)

// AdminToken is the admin API's token unless the test sets ADMIN_TOKEN.
const AdminToken = "stacktest-admin-token-0123456789abcdef"

// InternalToken is the service-to-service token (tracking's
// /internal/v1/ routes, commissions' attribution client) unless the test
// sets INTERNAL_TOKEN.
const InternalToken = "stacktest-internal-token-0123456789abcdef"

// Defaults are the variables the services require that platformtest.Env
// does not set: the admin token, the internal token shared by tracking and
// commissions, a fixed session signing key, small database pools and the
// local stack's open sign-up. A test's own values replace them.
func Defaults() map[string]string {
	return map[string]string{
		"ADMIN_TOKEN":         AdminToken,
		"INTERNAL_TOKEN":      InternalToken,
		"SESSION_SIGNING_KEY": base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, ed25519.SeedSize)),
		// Its public half, for the services that verify sessions (analytics).
		"SESSION_PUBLIC_KEY": base64.StdEncoding.EncodeToString(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, ed25519.SeedSize)).Public().(ed25519.PublicKey)),
		// Small pools: make test runs many stacks at once against one
		// Postgres (100 connections by default), and a burst of requests
		// grows a pool to its maximum (the platform's default is 32 per
		// service). A request then waits for a connection instead of the
		// server refusing one.
		"DB_MAX_CONNS": "6",
		// As make run: the first dashboard sign-in of a new person makes
		// their user and workspace (accounts; the service's own default is
		// invite-only).
		"SIGNUP": "open",
		// Webhooks: a fixed key seals the endpoints' secrets, and the
		// tests' receivers listen on loopback over http.
		"WEBHOOKS_SECRET_KEY":    base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{2}, 32)),
		"WEBHOOKS_ALLOW_PRIVATE": "true",
	}
}

// Start runs the stack's services (only the ones named, if any) with
// platformtest.Env, then Defaults, then env: each service reads the same
// variables, apart from those the stack sets itself (see stack.Options.Env).
// The services stop gracefully when the test ends, before the database is
// dropped.
func Start(t testing.TB, env map[string]string, only ...string) *stack.Stack {
	t.Helper()
	return StartOn(t, nil, env, only...)
}

// StartOn is Start with every service on clock (nil: the real one), so a
// test moves time instead of moving rows: windows, holds, expiries and
// rotation deadlines are tested on the fake clock.
func StartOn(t testing.TB, clock *platformtest.Clock, env map[string]string, only ...string) *stack.Stack {
	t.Helper()
	s, _ := start(t, clock, env, nil, only)
	return s
}

// StartElsewhere is Start with the services named elsewhere left to the
// test, which runs each in a process of its own (a drill kills one): the
// others start in-process, wired as if those ran beside them
// (stack.Options.Elsewhere). It returns each one's environment: the
// variables every service reads here with the stack's wiring for it on
// top, what Start would have given it.
func StartElsewhere(t testing.TB, env map[string]string, elsewhere []string, only ...string) (*stack.Stack, map[string]map[string]string) {
	t.Helper()
	return start(t, nil, env, elsewhere, only)
}

func start(t testing.TB, clock *platformtest.Clock, env map[string]string, elsewhere, only []string) (*stack.Stack, map[string]map[string]string) {
	t.Helper()
	all := platformtest.With(platformtest.With(platformtest.Env(t), Defaults()), env)
	var opts []platform.Option
	if clock != nil {
		opts = append(opts, platform.WithClock(clock.Now))
	}
	s, err := stack.Start(context.Background(), stack.Options{
		Env:       func(k string) string { return all[k] },
		Only:      only,
		Elsewhere: elsewhere,
		Platform:  opts,
	})
	if err != nil {
		t.Fatalf("start the stack: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	envs := make(map[string]map[string]string, len(elsewhere))
	for _, name := range elsewhere {
		envs[name] = platformtest.With(all, s.Wiring(name))
	}
	return s, envs
}
