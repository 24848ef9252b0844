// Package procs keeps invariant 21 (no orphan process) for the child
// processes the bot starts (MCP stdio servers, ACP agents): each runs in a
// process group of its own with a parent-death signal (Linux), each group
// is recorded durably in the store while it runs (Store), and at the next
// start every recorded group left by a dead bot process is killed
// (Registry.Reap) after its identity is checked, so a recycled pid is never
// signalled.
//
// Identity: a record holds the group leader's pid and its start time (clock
// ticks since boot, /proc/<pid>/stat field 22), the boot id, the host, and
// the owning bot process (pid and start time). Reap kills a group only when
// the record is from this boot and host, its owner is gone, and either its
// leader is alive with the recorded start time, or its leader is gone (then
// the group id cannot have been reused while any member of the old group
// lives: the kernel does not hand out a pid that is still a group id).
package procs

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"
)

// Record is one started process group.
type Record struct {
	Host   string `json:"host"`
	BootID string `json:"bootId"`
	PGID   int    `json:"pgid"`
	PID    int    `json:"pid"`
	// StartTime is the leader's start, in clock ticks after boot.
	StartTime uint64 `json:"startTime"`
	Kind      string `json:"kind"` // "mcp" | "acp"
	Name      string `json:"name"` // the configured server or agent name
	// OwnerPID and OwnerStart identify the bot process that started it.
	OwnerPID   int       `json:"ownerPid"`
	OwnerStart uint64    `json:"ownerStart"`
	StartedAt  time.Time `json:"startedAt"`
}

// Key identifies a record: the host and the group id.
func (r Record) Key() string { return fmt.Sprintf("%s/%d", r.Host, r.PGID) }

// Store persists the running process groups (store/memory, store/bolt,
// store/postgres; conformance suite in procstest).
type Store interface {
	// RecordProcess inserts or replaces a record by Key.
	RecordProcess(ctx context.Context, r Record) error
	// RemoveProcess deletes the record with that key; unknown keys are not an error.
	RemoveProcess(ctx context.Context, key string) error
	// Processes lists every record, ordered by Key.
	Processes(ctx context.Context) ([]Record, error)
}

// Kinds of processes.
const (
	KindMCP = "mcp"
	KindACP = "acp"
)

// Options tune a Registry.
type Options struct {
	// Grace is how long a group left by a dead bot gets between SIGTERM
	// and SIGKILL (default 2s).
	Grace time.Duration
}

// Deps are the registry's collaborators.
type Deps struct {
	Store Store
	Log   zerolog.Logger
	// After is the timer (nil: time.After).
	After func(time.Duration) <-chan time.Time
	// Now stamps records (nil: time.Now).
	Now func() time.Time
	// OS reads process identities and sends signals (nil: the real one).
	OS OS
}

// OS is what the registry needs of the operating system.
type OS interface {
	Host() string
	BootID() string
	Self() (pid int, start uint64)
	// StartTime is a live process's start time; ok false when it is gone.
	StartTime(pid int) (start uint64, ok bool)
	// KillGroup signals every process of the group; false when none is left.
	KillGroup(pgid int, sig Signal) bool
}

// Signal is a signal the registry sends.
type Signal int

// Signals.
const (
	SIGTERM Signal = 15
	SIGKILL Signal = 9
)

// Registry records started groups and reaps those a dead bot left.
type Registry struct {
	o Options
	d Deps
}

// New returns a registry; it does no I/O.
func New(o Options, d Deps) *Registry {
	if o.Grace <= 0 {
		o.Grace = 2 * time.Second
	}
	if d.After == nil {
		d.After = time.After
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.OS == nil {
		d.OS = realOS{}
	}
	return &Registry{o: o, d: d}
}

// Started records the group of a process just started (pid is its leader)
// and returns the function that forgets it once the group is gone. A nil
// registry records nothing. A failure to record is logged: the process
// runs on, covered by its parent-death signal.
func (r *Registry) Started(ctx context.Context, pid int, kind, name string) (release func()) {
	if r == nil || r.d.Store == nil || pid <= 0 {
		return func() {}
	}
	start, _ := r.d.OS.StartTime(pid)
	opid, ostart := r.d.OS.Self()
	rec := Record{Host: r.d.OS.Host(), BootID: r.d.OS.BootID(), PGID: pid, PID: pid, StartTime: start, Kind: kind, Name: name,
		OwnerPID: opid, OwnerStart: ostart, StartedAt: r.d.Now().UTC()}
	if err := r.d.Store.RecordProcess(ctx, rec); err != nil {
		r.d.Log.Warn().Err(err).Str("kind", kind).Str("name", name).Int("pgid", pid).Msg("child process group not recorded")
		return func() {}
	}
	r.d.Log.Debug().Str("kind", kind).Str("name", name).Int("pgid", pid).Msg("child process group recorded")
	return func() {
		if err := r.d.Store.RemoveProcess(context.WithoutCancel(ctx), rec.Key()); err != nil {
			r.d.Log.Warn().Err(err).Str("kind", kind).Str("name", name).Int("pgid", pid).Msg("ended child process group not forgotten")
		}
	}
}

// Reap kills every recorded group a dead bot process of this host left
// running (SIGTERM, then SIGKILL after Grace), logs each, and forgets the
// records that can no longer name a live group. It returns how many groups
// it killed. Records of live bot processes (another process of a cluster
// on this host) and of other hosts are left alone.
func (r *Registry) Reap(ctx context.Context) (int, error) {
	if r == nil || r.d.Store == nil {
		return 0, nil
	}
	recs, err := r.d.Store.Processes(ctx)
	if err != nil {
		return 0, fmt.Errorf("reap child processes: %w", err)
	}
	host, boot := r.d.OS.Host(), r.d.OS.BootID()
	self, selfStart := r.d.OS.Self()
	var kill []Record
	for _, rec := range recs {
		if rec.Host != host {
			continue // another host's: its own bot reaps it
		}
		if rec.OwnerPID == self && rec.OwnerStart == selfStart {
			continue // ours, started in this process
		}
		if rec.BootID == boot {
			if st, alive := r.d.OS.StartTime(rec.OwnerPID); alive && st == rec.OwnerStart {
				continue // its bot process still runs
			}
			if st, alive := r.d.OS.StartTime(rec.PID); !alive || st == rec.StartTime {
				kill = append(kill, rec)
				continue
			}
			r.d.Log.Info().Str("kind", rec.Kind).Str("name", rec.Name).Int("pgid", rec.PGID).Msg("recorded child process group: its pid now names another process; not signalled")
		}
		// Another boot, or a recycled leader pid: nothing of it can run.
		if err := r.d.Store.RemoveProcess(ctx, rec.Key()); err != nil {
			return 0, fmt.Errorf("reap child processes: %w", err)
		}
	}
	n := 0
	var live []Record
	for _, rec := range kill {
		if r.d.OS.KillGroup(rec.PGID, SIGTERM) {
			live = append(live, rec)
			n++
			r.d.Log.Warn().Str("kind", rec.Kind).Str("name", rec.Name).Int("pgid", rec.PGID).Int("ownerPid", rec.OwnerPID).
				Msg("killed a child process group a previous run of the bot left running")
		}
	}
	if len(live) > 0 {
		select {
		case <-ctx.Done():
		case <-r.d.After(r.o.Grace):
		}
		for _, rec := range live {
			r.d.OS.KillGroup(rec.PGID, SIGKILL)
		}
	}
	for _, rec := range kill {
		if err := r.d.Store.RemoveProcess(ctx, rec.Key()); err != nil {
			return n, fmt.Errorf("reap child processes: %w", err)
		}
	}
	return n, nil
}
