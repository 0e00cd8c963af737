package catalogsync

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/svc-dev/svc/libs/auth/apikey"
	"github.com/svc-dev/svc/libs/outbox"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
)

// DefaultKeyUseInterval is how often a service reports the keys that
// authenticated: the console's last_used_at is at most this late (plus the
// relay's and accounts' consumer's delay).
const DefaultKeyUseInterval = time.Minute

// KeyUseReporter reports, every Interval, one ApiKeyUsed event per key that
// authenticated in this process since the last report (apikey.Uses, fed by
// the Authenticator), through the service's outbox in one transaction. A
// busy key costs one event per interval however many requests it signs;
// nothing is written on the request path. A report that fails keeps its
// uses for the next one.
type KeyUseReporter struct {
	Pool     *pgxpool.Pool
	Uses     *apikey.Uses
	Service  string // the reporting service, e.g. "tracking"
	Interval time.Duration
	Logger   *slog.Logger
}

// Run reports every Interval until ctx ends, then once more (with a few
// seconds of its own) so a clean shutdown loses no use.
func (r KeyUseReporter) Run(ctx context.Context) error {
	if r.Pool == nil || r.Uses == nil || r.Service == "" {
		return errors.New("catalogsync: key use reporter needs a pool, a collector and a service name")
	}
	interval := r.Interval
	if interval <= 0 {
		interval = DefaultKeyUseInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			final, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
			defer cancel()
			r.report(final)
			return nil
		case <-t.C:
			r.report(ctx)
		}
	}
}

func (r KeyUseReporter) report(ctx context.Context) {
	if err := r.Report(ctx); err != nil && r.Logger != nil {
		r.Logger.WarnContext(ctx, "key use report failed; kept for the next", "err", err)
	}
}

// Report writes the pending uses to the outbox now.
func (r KeyUseReporter) Report(ctx context.Context) error {
	uses := r.Uses.Drain()
	if len(uses) == 0 {
		return nil
	}
	envs := make([]*eventsv1.Envelope, 0, len(uses))
	for _, u := range uses {
		payload, err := proto.Marshal(&eventsv1.ApiKeyUsed{
			KeyId: u.KeyID, ProgramId: u.ProgramID, UsedAt: timestamppb.New(u.At), Service: r.Service,
		})
		if err != nil {
			r.Uses.Restore(uses)
			return fmt.Errorf("encode key use: %w", err)
		}
		envs = append(envs, &eventsv1.Envelope{
			Type: eventsv1.TypeAPIKeyUsed, OccurredAt: timestamppb.New(u.At), ProgramId: u.ProgramID,
			Source: r.Service, Payload: payload,
		})
	}
	err := pgx.BeginFunc(ctx, r.Pool, func(tx pgx.Tx) error {
		return outbox.EnqueueMany(ctx, tx, eventsv1.TopicAPIKeyUsed, envs)
	})
	if err != nil {
		r.Uses.Restore(uses)
		return fmt.Errorf("report %d key uses: %w", len(uses), err)
	}
	return nil
}
