// Command accounts runs the catalog service: `accounts serve` (default) or
// `accounts migrate`; `accounts keygen` prints a new session key pair.
package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/services/accounts/server"
)

func main() {
	// keygen needs no configuration, database or broker, so it is answered
	// here rather than by platform.Run (which runs serve, migrate and dead-letters: all need the platform; keygen needs nothing).
	if len(os.Args) > 1 && os.Args[1] == "keygen" {
		os.Exit(keygen(os.Args[2:], rand.Reader, os.Stdout, os.Stderr))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := platform.Run(ctx, server.Spec(), os.Args[1:], os.Getenv, os.Stdout)
	stop()
	os.Exit(code)
}

// keygen prints a new Ed25519 key pair for dashboard and CLI session tokens
// as two environment lines on stdout:
//
//	SESSION_SIGNING_KEY=<base64 32-byte seed>   accounts' secret
//	SESSION_PUBLIC_KEY=<base64 public key>      tracking (and any verifier)
//
// The hint about which is secret goes to stderr, so stdout can be redirected
// to an env file as is. It returns the process exit code.
func keygen(args []string, random io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintln(stderr, "usage: accounts keygen (takes no arguments)")
		return 2
	}
	seed := make([]byte, ed25519.SeedSize)
	if _, err := io.ReadFull(random, seed); err != nil {
		fmt.Fprintf(stderr, "keygen: read random seed: %v\n", err)
		return 1
	}
	pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
	if _, err := fmt.Fprintf(stdout, "SESSION_SIGNING_KEY=%s\nSESSION_PUBLIC_KEY=%s\n",
		base64.StdEncoding.EncodeToString(seed), base64.StdEncoding.EncodeToString(pub)); err != nil {
		fmt.Fprintf(stderr, "keygen: write keys: %v\n", err)
		return 1
	}
	fmt.Fprintln(stderr, "# SESSION_SIGNING_KEY is a secret: store it only in accounts' Secret (key SESSION_SIGNING_KEY), never in values files or logs.")
	fmt.Fprintln(stderr, "# SESSION_PUBLIC_KEY is not secret: tracking's SESSION_PUBLIC_KEY (Helm value global.sessionPublicKey).")
	return 0
}
