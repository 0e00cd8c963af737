package pgstore

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// foldCounters moves pending click increments into link_stats and
// partner_program_metrics in one statement: the deltas it deletes and the
// counters it raises commit together, so an increment is counted once even
// with several pods folding at the same time (SKIP LOCKED splits the work).
// Counters are in key order so concurrent folders lock rows the same way.
const foldCounters = `
WITH d AS (
	DELETE FROM click_count_deltas WHERE id IN (
		SELECT id FROM click_count_deltas ORDER BY id LIMIT 20000 FOR UPDATE SKIP LOCKED)
	RETURNING link_id, program_id, partner_id, clicks, last_clicked
), links AS (
	INSERT INTO link_stats (link_id, clicks, last_clicked)
	SELECT link_id, sum(clicks), max(last_clicked) FROM d GROUP BY link_id ORDER BY link_id
	ON CONFLICT (link_id) DO UPDATE SET clicks = link_stats.clicks + EXCLUDED.clicks,
		last_clicked = GREATEST(link_stats.last_clicked, EXCLUDED.last_clicked)
	RETURNING 1
)
INSERT INTO partner_program_metrics (program_id, partner_id, clicks)
SELECT program_id, partner_id, sum(clicks) FROM d GROUP BY program_id, partner_id ORDER BY program_id, partner_id
ON CONFLICT (program_id, partner_id) DO UPDATE SET clicks = partner_program_metrics.clicks + EXCLUDED.clicks`

// runCounterFolder folds every interval until ctx ends.
func runCounterFolder(ctx context.Context, pool *pgxpool.Pool, interval time.Duration, logger *slog.Logger) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			// One last fold so a clean stop leaves nothing pending.
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_ = fold(fctx, pool)
			cancel()
			return nil
		case <-t.C:
			if err := fold(ctx, pool); err != nil && ctx.Err() == nil {
				logger.WarnContext(ctx, "fold click counters", "err", err)
			}
		}
	}
}

func fold(ctx context.Context, pool *pgxpool.Pool) error {
	if _, err := pool.Exec(ctx, foldCounters); err != nil {
		return fmt.Errorf("fold click counters: %w", err)
	}
	return nil
}
