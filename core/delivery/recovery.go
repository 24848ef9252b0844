package delivery

import (
	"context"
	"time"
)

// RunRecovery finishes, every interval until ctx ends, the deliveries left
// pending or sent-but-unrecorded for longer than after: in one process
// what a transient failure left (the sender's idempotency finds one that
// was displayed, and its entry is written once); with several, what a dead
// process's claim left once its lease ran out. A failed pass is logged and
// the next one tries again; it returns nil when ctx ends.
func (o *Outbound) RunRecovery(ctx context.Context, interval, after time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		n, err := o.Recover(ctx, o.clock.Now().Add(-after))
		switch {
		case err != nil && ctx.Err() == nil:
			o.log.Warn().Err(err).Msg("recover pending deliveries")
		case n > 0:
			o.log.Info().Int("deliveries", n).Msg("finished deliveries left pending")
		}
	}
}
