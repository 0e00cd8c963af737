package server

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/services/commissions/internal/ledger/pgstore"
)

// commands are commissions' own subcommands.
func commands() map[string]platform.Command {
	return map[string]platform.Command{
		"backfill": {Usage: "backfill customer-click-ids <file.csv|->  fill the customer click ids of older sales and commissions from `tracking customers export-clicks` (- reads stdin)", Run: backfillCommand},
	}
}

// backfillCommand is `commissions backfill customer-click-ids <file|->`.
func backfillCommand(ctx context.Context, c platform.CommandEnv, args []string) int {
	if len(args) != 2 || args[0] != "customer-click-ids" {
		fmt.Fprintln(c.Stderr, "usage: commissions backfill customer-click-ids <file.csv|->   (tracking customers export-clicks; - reads stdin)")
		return 2
	}
	// "-" reads stdin: the image has no shell to copy a file in with, so
	// the export is piped from one pod to the other.
	var in io.Reader = c.Stdin
	if args[1] != "-" {
		f, err := os.Open(args[1])
		if err != nil {
			fmt.Fprintf(c.Stderr, "commissions backfill: %v\n", err)
			return 1
		}
		defer f.Close()
		in = f
	}
	res, err := pgstore.BackfillCustomerClicks(ctx, c.Pool, in)
	if err != nil {
		fmt.Fprintf(c.Stderr, "commissions backfill: nothing written: %v\n", err)
		return 1
	}
	fmt.Fprintf(c.Stdout, "read %d customers; filled %d sales and %d commissions\n", res.Read, res.Sales, res.Commissions)
	return 0
}
