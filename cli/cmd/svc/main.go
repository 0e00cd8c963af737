// Command svc is the command-line client of the svc referral attribution
// service: sign-in, program creation, integration status and test events.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/svc-dev/svc/cli/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := app.Run(ctx, os.Args[1:], app.System())
	stop()
	os.Exit(code)
}
