package server

import (
	"context"
	"fmt"

	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/services/tracking/internal/ingest/pgstore"
)

// commands are tracking's own subcommands.
func commands() map[string]platform.Command {
	return map[string]platform.Command{
		"customers": {Usage: "customers export-clicks  write every customer's id and click id as CSV (header customer_id,click_id) to stdout", Run: customersCommand},
	}
}

// customersCommand is `tracking customers export-clicks`: the input of
// `commissions backfill customer-click-ids -` for ledger rows written before
// commissions kept the customer's click id (services/commissions/README.md).
func customersCommand(ctx context.Context, c platform.CommandEnv, args []string) int {
	if len(args) != 1 || args[0] != "export-clicks" {
		fmt.Fprintln(c.Stderr, "usage: tracking customers export-clicks   (CSV customer_id,click_id on stdout)")
		return 2
	}
	n, err := pgstore.ExportCustomerClicks(ctx, c.Pool, c.Stdout)
	if err != nil {
		fmt.Fprintf(c.Stderr, "tracking customers export-clicks: %v\n", err)
		return 1
	}
	fmt.Fprintf(c.Stderr, "exported %d customers\n", n)
	return 0
}
