package server

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/svc-dev/svc/libs/platform"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	aggregate "github.com/svc-dev/svc/services/analytics/internal/aggregate/consumer"
	"github.com/svc-dev/svc/services/analytics/internal/fx"
	"github.com/svc-dev/svc/services/analytics/internal/rebuild"
)

// commands are analytics' own subcommands.
func commands() map[string]platform.Command {
	return map[string]platform.Command{
		"fx":      {Usage: "fx import <file.csv|->  load dated exchange rates (header currency,date,usd_per_unit; - reads stdin)", Run: fxCommand},
		"rebuild": {Usage: "rebuild [--allow-loss]  recompute every aggregate from the retained events, then switch to them", Run: rebuildCommand},
	}
}

// rebuildCommand is `analytics rebuild`: a new generation of the
// aggregates from every retained tracking and ledger event, swapped in
// while the service keeps running.
func rebuildCommand(ctx context.Context, c platform.CommandEnv, args []string) int {
	allowLoss := len(args) == 1 && args[0] == "--allow-loss"
	if len(args) > 1 || (len(args) == 1 && !allowLoss) {
		fmt.Fprintln(c.Stderr, "usage: analytics rebuild [--allow-loss]")
		return 2
	}
	res, err := rebuild.Run(ctx, rebuild.Config{
		Pool: c.Pool, Schema: c.Config.Schema, Brokers: c.Config.KafkaBrokers, Logger: c.Logger, Progress: c.Stdout, Now: c.Now,
		WritersLock: aggregate.FiguresLock, AllowLoss: allowLoss,
		Sources: []rebuild.Source{
			{Topic: eventsv1.TopicTracking, Apply: aggregate.Tracking},
			{Topic: eventsv1.TopicCommissions, Apply: aggregate.Commissions},
		},
	})
	if err != nil {
		fmt.Fprintf(c.Stderr, "analytics rebuild: generation %d failed, the live figures are unchanged: %v\n", res.Generation, err)
		return 1
	}
	fmt.Fprintf(c.Stdout, "rebuilt generation %d from %d events (%d undecodable skipped) in %s\n", res.Generation, res.Events, res.Skipped, res.Took.Round(time.Millisecond))
	return 0
}

// fxCommand is `analytics fx import <csv>`: the file checked whole, then
// loaded in one transaction; what changed and each currency's newest
// rate on stdout.
func fxCommand(ctx context.Context, c platform.CommandEnv, args []string) int {
	if len(args) != 2 || args[0] != "import" {
		fmt.Fprintln(c.Stderr, "usage: analytics fx import <file.csv|->   (header: currency,date,usd_per_unit; - reads stdin)")
		return 2
	}
	// "-" reads the file from stdin: the image has no shell or tar to copy
	// a file into a pod (kubectl exec -i ... analytics fx import - < rates.csv).
	in := c.Stdin
	if args[1] != "-" {
		f, err := os.Open(args[1])
		if err != nil {
			fmt.Fprintf(c.Stderr, "analytics fx import: %v\n", err)
			return 1
		}
		defer f.Close()
		in = f
	}
	rates, err := fx.Parse(in)
	if err != nil {
		fmt.Fprintf(c.Stderr, "analytics fx import: %s: nothing imported:\n%v\n", args[1], err)
		return 1
	}
	res, err := fx.Import(ctx, c.Pool, rates, aggregate.FiguresLock)
	if err != nil {
		fmt.Fprintf(c.Stderr, "analytics fx import: %s: nothing imported: %v\n", args[1], err)
		return 1
	}
	latest := make([]string, 0, len(res.Latest))
	for cur, d := range res.Latest {
		latest = append(latest, cur+" "+d.Format(time.DateOnly))
	}
	sort.Strings(latest)
	fmt.Fprintf(c.Stdout, "imported %d rates from %s: %d new dates, %d replaced; newest rate per currency: %s\n",
		len(rates), args[1], res.Added, res.Replaced, strings.Join(latest, ", "))
	return 0
}
