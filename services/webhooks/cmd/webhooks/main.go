// Command webhooks runs the outgoing webhooks service: `webhooks serve`
// (default) or `webhooks migrate`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/services/webhooks/server"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := platform.Run(ctx, server.Spec(), os.Args[1:], os.Getenv, os.Stdout)
	stop()
	os.Exit(code)
}
