package bot

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/store/postgres"
)

// Cluster timings (several processes on one PostgreSQL database).
const (
	// clusterClaimLease keeps other processes off a delivery this one is
	// sending; a dead process's pending deliveries are finished by the
	// leader once it ran out.
	clusterClaimLease = time.Minute
	// clusterHousekeeping is how often the leader picks up jobs added by
	// other processes and finishes deliveries dead processes left.
	clusterHousekeeping = 15 * time.Second
	// clusterBindingTick is the binding sweep and activity flush period:
	// other processes see a Touch within about this long.
	clusterBindingTick = time.Second
)

// cluster is what a bot process on PostgreSQL adds so that several
// processes (gateway shards, a standby) share one database: the binding
// change listener, per-session turn locks, delivery claims and the
// scheduler leader. nil on bbolt (one process owns the file).
type cluster struct {
	pg       *postgres.Store
	owner    string
	turns    *postgres.TurnLocker
	listener *postgres.Listener
	leader   *postgres.Leader
	leading  atomic.Bool // this process holds the scheduler leader lock
	log      zerolog.Logger
}

// newCluster returns nil, nil unless st is PostgreSQL.
func newCluster(ctx context.Context, st Store, bindings *binding.Service, log zerolog.Logger) (*cluster, error) {
	pg, ok := st.(*postgres.Store)
	if !ok {
		return nil, nil
	}
	turns := pg.NewTurnLocker(postgres.TurnLockOptions{Log: log})
	c := &cluster{pg: pg, owner: processOwner(), turns: turns, log: log}
	c.listener = pg.NewListener(bindings.Refresh, postgres.ListenerOptions{Log: log})
	c.leader = pg.NewLeader(postgres.LeaderOptions{Log: log, OnChange: func(leading bool) {
		c.leading.Store(leading)
		log.Info().Bool("leading", leading).Str("owner", c.owner).Msg("scheduler leadership changed")
	}})
	return c, nil
}

// processOwner names this process in delivery claims.
func processOwner() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// claimer is the delivery claimer (nil without a cluster).
func (c *cluster) claimer() delivery.Claimer {
	if c == nil {
		return nil
	}
	return c.pg
}

func (c *cluster) ownerID() string {
	if c == nil {
		return ""
	}
	return c.owner
}

// turnLocker is the cross-process session lock (nil without a cluster).
func (c *cluster) turnLocker() session.TurnLocker {
	if c == nil {
		return nil
	}
	return c.turns
}

// bindingTick is the binding sweep/flush period: shorter when several
// processes share the store (PostgreSQL).
func bindingTick(st Store) time.Duration {
	if _, ok := st.(*postgres.Store); ok {
		return clusterBindingTick
	}
	return binding.DefaultSweepInterval
}

// leads reports whether this process runs the scheduler: always on bbolt
// (one process), on PostgreSQL while it holds the leader lock.
func (a *App) leads() bool {
	return a.cluster == nil || a.cluster.leading.Load()
}

// leaderGauge is agentbot_scheduler_leader: 1 while this process runs the
// scheduler (on bbolt: whenever the scheduler is enabled).
func leaderGauge(a *App) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "agentbot_scheduler_leader",
		Help: "1 while this process runs the scheduler (with several processes on PostgreSQL: holds the leader lock)."},
		func() float64 {
			if a.sched != nil && a.leads() {
				return 1
			}
			return 0
		})
}

func (c *cluster) close() {
	if c != nil {
		c.turns.Close()
	}
}

// runLed runs what exactly one process may run: the scheduler, the
// outbox's recovery loop, the periodic audit and the recall indexer, and with a cluster the job resync of the shared
// database, under the leader lock.
func (a *App) runLed(ctx context.Context) error {
	if a.cluster == nil {
		g, gctx := errgroup.WithContext(ctx)
		if a.sched != nil {
			g.Go(func() error { return a.sched.Run(gctx) })
		}
		g.Go(func() error { return a.outbound.RunRecovery(gctx, pendingRetry, pendingRetry) })
		g.Go(func() error { return a.auditor.Run(gctx) })
		g.Go(func() error { return a.recall.Run(gctx) })
		return g.Wait()
	}
	return a.cluster.leader.Run(ctx, func(ctx context.Context) error {
		g, gctx := errgroup.WithContext(ctx)
		if a.sched != nil {
			g.Go(func() error { return a.sched.Run(gctx) })
			g.Go(func() error { a.resyncJobs(gctx); return nil })
		}
		// Deliveries whose owner died: claims ran out.
		g.Go(func() error { return a.outbound.RunRecovery(gctx, clusterHousekeeping, clusterClaimLease) })
		g.Go(func() error { return a.auditor.Run(gctx) })
		// One indexer for the database: two would derive documents from
		// different moments and could put back an erased one.
		g.Go(func() error { return a.recall.Run(gctx) })
		return g.Wait()
	})
}

// pendingRetry is how often, and after how long, a pending delivery is
// sent again in a single process (a transient failure left it).
const pendingRetry = 2 * time.Minute

// resyncJobs, in the leader, every clusterHousekeeping: picks up jobs
// other processes added or changed (RunDue tracks every stored job; the
// ledger keeps an instant from running twice).
func (a *App) resyncJobs(ctx context.Context) {
	t := time.NewTicker(clusterHousekeeping)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := a.sched.RunDue(ctx); err != nil && ctx.Err() == nil {
			a.log.Warn().Err(err).Msg("leader: job resync")
		}
	}
}
