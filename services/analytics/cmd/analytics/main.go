// Command analytics runs the analytics service: `analytics serve`
// (default) or `analytics migrate`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	// The timezone parameter names IANA zones: the binary carries the zone
	// database, so an image without /usr/share/zoneinfo answers the same.
	_ "time/tzdata"

	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/services/analytics/server"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := platform.Run(ctx, server.Spec(), os.Args[1:], os.Getenv, os.Stdout)
	stop()
	os.Exit(code)
}
