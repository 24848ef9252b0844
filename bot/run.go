package bot

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"

	"github.com/agentbot/agentbot/console"
	"github.com/agentbot/agentbot/internal/redact"
	"github.com/agentbot/agentbot/store/bolt"
)

// Run opens the store, builds every component over it, loads state,
// recovers unfinished deliveries, and runs every component under one
// errgroup until ctx ends; then everything stops within bounded time and
// the store is closed. A ctx ended while starting is a clean stop.
func (a *App) Run(ctx context.Context) error {
	if err := a.open(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer a.release()
	close(a.up)
	if err := a.load(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting: a clean stop
		}
		return err
	}
	err := a.serve(ctx)
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

// load reads the state the previous run left: bindings, sessions, and the
// child process groups it left running (killed).
func (a *App) load(ctx context.Context) error {
	if err := a.bindings.Load(ctx); err != nil {
		return err
	}
	if err := a.sessions.Load(ctx); err != nil {
		return err
	}
	if n, err := a.procs.Reap(ctx); err != nil {
		a.log.Error().Err(err).Msg("child processes a previous run left could not be checked")
	} else if n > 0 {
		a.log.Warn().Int("groups", n).Msg("killed child process groups a previous run left running")
	}
	return nil
}

// serve runs every component until ctx ends. Shutdown order: the adapters
// and the scheduler stop taking work and finish what they accepted; then
// the sessions drain their queues; then the MCP servers stop and the
// bindings flush their last activity; Run closes the store last.
func (a *App) serve(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	sessCtx, stopSessions := context.WithCancel(context.WithoutCancel(ctx))
	bindCtx, stopBindings := context.WithCancel(context.WithoutCancel(ctx))
	// MCP servers stop after the sessions drained (a draining turn may call a tool).
	toolsCtx, stopTools := context.WithCancel(context.WithoutCancel(ctx))
	var producers sync.WaitGroup
	a.produce(g, gctx, &producers)
	go func() { producers.Wait(); stopSessions() }()
	g.Go(func() error { defer stopBindings(); defer stopTools(); return a.sessions.Run(sessCtx) })
	if a.tools != nil {
		g.Go(func() error { return a.tools.Run(toolsCtx) })
	}
	if a.acp != nil {
		g.Go(func() error { return a.acp.Run(sessCtx) })
	}
	g.Go(func() error { return a.bindings.Run(bindCtx) })
	if a.cluster != nil {
		// Other processes' binding changes, within a second.
		g.Go(func() error { return a.cluster.listener.Run(gctx) })
	}
	if a.cfg.HTTP.Enabled() {
		g.Go(func() error { return a.serveHTTP(gctx) })
	}
	if p, ok := a.store.(deliveryPruner); ok && a.cfg.Store.DeliveryRetention() > 0 {
		g.Go(func() error { a.pruneDeliveries(gctx, p, time.NewTicker(time.Hour).C); return nil })
	}
	if a.cfg.Store.DeliveryRetention() > 0 {
		g.Go(func() error { a.pruneUsage(gctx, time.NewTicker(time.Hour).C); return nil })
	}
	return g.Wait()
}

// produce starts what hands the sessions work, each counted in producers
// until it stopped: the Matrix /sync loop, the Discord gateway, and the
// recovery of the previous run's work followed by the scheduler.
func (a *App) produce(g *errgroup.Group, ctx context.Context, producers *sync.WaitGroup) {
	if a.matrix != nil {
		producers.Add(1)
		g.Go(func() error {
			defer producers.Done()
			// The /sync loop starts once the previous run's deliveries were
			// recovered and its turns resumed: an event handed again (its
			// token was not saved) then finds its command's reply sent and
			// its turn known, never a half-finished state.
			select {
			case <-ctx.Done():
				return nil
			case <-a.resumed:
			}
			return a.matrix.Run(ctx)
		})
	}
	if a.gateway != nil {
		producers.Add(1)
		g.Go(func() error { defer producers.Done(); return a.gateway.Run(ctx) })
		go func() {
			select {
			case <-ctx.Done():
			case <-a.gateway.Connected():
				close(a.connected)
			}
		}()
	} else {
		close(a.connected) // Matrix's REST needs no connection first
	}
	producers.Add(1)
	g.Go(func() error {
		defer producers.Done()
		// Finish deliveries a previous process left pending, once connected.
		select {
		case <-ctx.Done():
			return nil
		case <-a.connected:
		}
		a.recover(context.WithoutCancel(ctx))
		return a.runLed(ctx) // the scheduler; with several processes, in the leader only
	})
}

// recover finishes the deliveries the previous run left pending, then
// resumes its turns and subagent runs.
func (a *App) recover(ctx context.Context) {
	n, err := a.outbound.Recover(ctx, a.started)
	close(a.recovered)
	if err != nil {
		a.log.Error().Err(err).Msg("recover deliveries")
	} else if n > 0 {
		a.log.Info().Int("deliveries", n).Msg("finished deliveries left by the previous run")
	}
	if turns, runs := a.sessions.Resume(ctx); turns+runs > 0 {
		a.log.Info().Int("turns", turns).Int("subagentRuns", runs).Msg("resumed work left by the previous run")
	}
	close(a.resumed)
}

// release closes what open opened: the recall index, the cluster's
// connections, then the store. A second call does nothing.
func (a *App) release() error {
	a.closeOnce.Do(func() {
		if a.recall != nil {
			_ = a.recall.close() // before the store
		}
		a.cluster.close()
		a.closeErr = a.store.Close()
	})
	return a.closeErr
}

// Close releases what Run opened. Run does so itself when it returns; New
// opens nothing, so Close on an App never run does nothing. A second call
// does nothing.
func (a *App) Close() error {
	select {
	case <-a.up:
		return a.release()
	default:
		return nil
	}
}

// Started is closed once Run opened the store and built every component;
// from then on the App's components (and Scheduler) are set. It stays
// open when Run fails to start.
func (a *App) Started() <-chan struct{} { return a.up }

// serveHTTP serves the probes, /metrics, /inspect, /backup and the
// console until ctx ends.
func (a *App) serveHTTP(ctx context.Context) error {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !a.ready() {
			http.Error(w, "gateway not ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
		// Degraded, not unready: their fallbacks answer, or a notice says why.
		for _, d := range a.models.Degraded() {
			_, _ = w.Write([]byte("model " + d + "\n"))
		}
		if a.tools != nil {
			// Degraded, not unready: the bot still answers without them.
			for _, f := range a.tools.Failing() {
				_, _ = w.Write([]byte("mcp " + redact.String(f) + "\n"))
			}
		}
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{}))
	mux.Handle("GET /inspect/{what}", inspectHandler(inspector{a.store, redact.New(a.cfg.Secrets()...)}))
	mux.Handle("GET /backup", backupHandler(a.store, a.cfg.HTTP.Token))
	console.New(console.Options{Store: a.store, Audit: a.auditor.Conversation, Location: a.cfg.HTTP.Location(), Token: a.cfg.HTTP.Token,
		Status: func() console.State { return console.State{Ready: a.ready(), Started: a.started} },
		Log:    a.log.With().Str("component", "console").Logger(), Memory: a.recall.console(), Notes: a.notes}).Mount(mux) // read-only pages at /
	ln, err := net.Listen("tcp", a.cfg.HTTP.Listen)
	if err != nil {
		return fmt.Errorf("http.listen %s: %w", a.cfg.HTTP.Listen, err)
	}
	a.httpAddr <- ln.Addr().String()
	// Every path, probes included, passes the Host check; everything but
	// the probes needs the token when one is set (/metrics included).
	guarded := console.Guard(console.GuardOptions{Listen: a.cfg.HTTP.Listen, Token: a.cfg.HTTP.Token,
		Open: []string{"/healthz", "/readyz"}}, mux)
	srv := &http.Server{Handler: guarded, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	a.log.Info().Str("addr", ln.Addr().String()).Msg("serving /healthz /readyz /metrics and the console at /")
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http: %w", err)
	}
	return nil
}

// deliveryPruner is a store that deletes old finished outbox records
// (bbolt; PostgreSQL does not yet).
type deliveryPruner interface {
	PruneDeliveries(ctx context.Context, before time.Time, dry bool) (bolt.DeliveryPrune, error)
}

// pruneDeliveries applies store.deliveryRetentionDays at start and on
// every tick until ctx ends.
func (a *App) pruneDeliveries(ctx context.Context, p deliveryPruner, tick <-chan time.Time) {
	for {
		before := a.clock.Now().Add(-a.cfg.Store.DeliveryRetention())
		n, err := p.PruneDeliveries(ctx, before, false)
		switch {
		case err != nil && ctx.Err() == nil:
			a.log.Error().Err(err).Msg("delivery retention")
		case n.Rows > 0:
			a.log.Info().Int("deliveries", n.Rows).Int64("bytes", n.Bytes).Int("retentionDays", a.cfg.Store.DeliveryRetentionDays).
				Msg("deleted finished deliveries past retention")
		}
		select {
		case <-ctx.Done():
			return
		case <-tick:
		}
	}
}
