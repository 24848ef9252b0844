// Package migrate copies a store into another through the store interfaces (`bot migrate-store`: bbolt into
// PostgreSQL). It knows no storage engine: the source is read as every store lists itself, the target is
// written record by record and then counted.
//
// Rules: the target must be empty (Copy refuses otherwise, naming what it holds); on an error the target holds a
// partial copy, to be emptied before trying again; after the copy the target's counts must equal what was copied.
// Two kinds are not listable through the interfaces and are rebuilt: the scheduler's instant ledger is seeded per
// job with the newest ScheduledAt of its scheduled (not manual) runs, which is what the source ledger holds unless
// the bot crashed between claiming an instant and recording its run; webhooks are looked up for every channel id
// the bindings, deliveries, sessions and jobs name (a webhook of a channel named nowhere is not copied, and the
// adapter creates a new one when it needs it). Usage records and the registry of running child processes (an orphan
// left by a crash is reaped by the next start on its host, whichever store it reads) are copied as they are. The
// recall index is not copied: the target queues every imported entry for it (ImportEntries), so the indexer
// rebuilds it from the transcripts.
package migrate

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/core/usage"
	"github.com/agentbot/agentbot/internal/procs"
	"github.com/agentbot/agentbot/scheduler"
)

// Source is the store copied from.
type Source interface {
	Bindings(ctx context.Context) ([]binding.Record, error)
	Sessions(ctx context.Context) ([]string, error)
	Range(ctx context.Context, key string, from uint64, limit int) ([]transcript.Entry, error)
	Generation(ctx context.Context, key string) (int, error)
	Deliveries(ctx context.Context, state delivery.PendingState, limit int) ([]delivery.Record, error)
	SessionInfos(ctx context.Context) ([]session.Info, error)
	Jobs(ctx context.Context) ([]scheduler.Job, error)
	Runs(ctx context.Context, jobID string, limit int) ([]scheduler.Run, error)
	Webhook(ctx context.Context, channelID string) (id, token string, ok bool, err error)
	Usage(ctx context.Context, f usage.Filter) ([]usage.Record, error)
	Processes(ctx context.Context) ([]procs.Record, error)
}

// Target is the store copied into.
type Target interface {
	// Counts is the number of rows of each kind the target holds.
	Counts(ctx context.Context) (map[string]int64, error)
	PutBindings(ctx context.Context, recs ...binding.Record) error
	ImportEntries(ctx context.Context, key string, es []transcript.Entry) error
	SetGeneration(ctx context.Context, key string, gen int) error
	PutDelivery(ctx context.Context, r delivery.Record) error
	PutSessionInfo(ctx context.Context, in session.Info) error
	PutJob(ctx context.Context, j scheduler.Job) error
	PutRun(ctx context.Context, r scheduler.Run, keep int) error
	ClaimInstant(ctx context.Context, jobID string, at time.Time) (bool, error)
	PutWebhook(ctx context.Context, channelID, id, token string) error
	AddUsage(ctx context.Context, rs ...usage.Record) error
	RecordProcess(ctx context.Context, r procs.Record) error
}

// Report counts what Copy copied.
type Report struct {
	Bindings, Sessions, Entries, Deliveries, SessionInfos, Jobs, Runs, Ledger, Webhooks int
	ChannelsProbed                                                                      int
	Usage, Processes                                                                    int
}

// copier is one Copy: the stores, the report so far, and the channel ids
// seen (whose webhooks are copied last).
type copier struct {
	src      Source
	dst      Target
	rep      Report
	channels map[string]bool
}

// Copy copies every record of src into dst, which must be empty.
func Copy(ctx context.Context, src Source, dst Target) (Report, error) {
	c := &copier{src: src, dst: dst, channels: map[string]bool{}}
	if err := c.checkEmpty(ctx); err != nil {
		return c.rep, err
	}
	for _, step := range []func(context.Context) error{c.bindings, c.transcripts, c.deliveries, c.sessions, c.jobs, c.webhooks, c.usage, c.processes, c.verify} {
		if err := step(ctx); err != nil {
			return c.rep, err
		}
	}
	return c.rep, nil
}

func (c *copier) checkEmpty(ctx context.Context) error {
	counts, err := c.dst.Counts(ctx)
	if err != nil {
		return fmt.Errorf("count the target: %w", err)
	}
	var nonEmpty []string
	for _, t := range slices.Sorted(maps.Keys(counts)) {
		if counts[t] > 0 {
			nonEmpty = append(nonEmpty, fmt.Sprintf("%s: %d", t, counts[t]))
		}
	}
	if len(nonEmpty) > 0 {
		return fmt.Errorf("the target database is not empty (%s); migrate-store copies only into an empty database",
			strings.Join(nonEmpty, ", "))
	}
	return nil
}

// addChannel notes the guild channel ids among ids (not DMs).
func (c *copier) addChannel(ids ...string) {
	for _, id := range ids {
		if id = strings.TrimPrefix(id, "channel:"); id != "" && !strings.HasPrefix(id, "user:") {
			c.channels[id] = true
		}
	}
}

func (c *copier) bindings(ctx context.Context) error {
	bs, err := c.src.Bindings(ctx)
	if err != nil {
		return fmt.Errorf("read bindings: %w", err)
	}
	for chunk := range slices.Chunk(bs, 500) {
		if err := c.dst.PutBindings(ctx, chunk...); err != nil {
			return fmt.Errorf("copy bindings: %w", err)
		}
	}
	for _, b := range bs {
		c.addChannel(b.Conversation.ConversationID, b.Conversation.ParentConversationID)
	}
	c.rep.Bindings = len(bs)
	return nil
}

// transcripts copies every session's entries (seqs kept) and generation.
func (c *copier) transcripts(ctx context.Context) error {
	keys, err := c.src.Sessions(ctx)
	if err != nil {
		return fmt.Errorf("read transcripts: %w", err)
	}
	for _, key := range keys {
		for from := uint64(1); ; {
			es, err := c.src.Range(ctx, key, from, 1000)
			if err != nil {
				return fmt.Errorf("read transcript %s: %w", key, err)
			}
			if len(es) == 0 {
				break
			}
			if err := c.dst.ImportEntries(ctx, key, es); err != nil {
				return fmt.Errorf("copy transcript %s: %w", key, err)
			}
			c.rep.Entries += len(es)
			from = es[len(es)-1].Seq + 1
		}
		gen, err := c.src.Generation(ctx, key)
		if err != nil {
			return fmt.Errorf("read generation of %s: %w", key, err)
		}
		if err := c.dst.SetGeneration(ctx, key, gen); err != nil {
			return fmt.Errorf("copy generation of %s: %w", key, err)
		}
		c.rep.Sessions++
	}
	return nil
}

func (c *copier) deliveries(ctx context.Context) error {
	ds, err := c.src.Deliveries(ctx, "", 0)
	if err != nil {
		return fmt.Errorf("read deliveries: %w", err)
	}
	for _, d := range ds {
		if err := c.dst.PutDelivery(ctx, d); err != nil {
			return fmt.Errorf("copy delivery %s: %w", d.Delivery.ID, err)
		}
		c.addChannel(d.Delivery.Target.ConversationID, d.Delivery.Target.ParentConversationID)
	}
	c.rep.Deliveries = len(ds)
	return nil
}

func (c *copier) sessions(ctx context.Context) error {
	infos, err := c.src.SessionInfos(ctx)
	if err != nil {
		return fmt.Errorf("read sessions: %w", err)
	}
	for _, in := range infos {
		if err := c.dst.PutSessionInfo(ctx, in); err != nil {
			return fmt.Errorf("copy session %s: %w", in.Key, err)
		}
		c.addChannel(in.Thread, in.Requester.ConversationID, in.Requester.ParentConversationID)
	}
	c.rep.SessionInfos = len(infos)
	return nil
}

// jobs copies jobs and their runs, and seeds each job's instant ledger.
func (c *copier) jobs(ctx context.Context) error {
	jobs, err := c.src.Jobs(ctx)
	if err != nil {
		return fmt.Errorf("read jobs: %w", err)
	}
	for _, j := range jobs {
		if err := c.dst.PutJob(ctx, j); err != nil {
			return fmt.Errorf("copy job %s: %w", j.ID, err)
		}
		c.addChannel(j.To, j.CreatedIn.ConversationID, j.CreatedIn.ParentConversationID)
		runs, err := c.src.Runs(ctx, j.ID, 0)
		if err != nil {
			return fmt.Errorf("read runs of job %s: %w", j.ID, err)
		}
		var newest time.Time
		for _, r := range runs {
			if err := c.dst.PutRun(ctx, r, 0); err != nil {
				return fmt.Errorf("copy run %s/%s: %w", r.JobID, r.RunID, err)
			}
			if r.Trigger != scheduler.TriggerManual && !r.ScheduledAt.IsZero() && r.ScheduledAt.After(newest) {
				newest = r.ScheduledAt
			}
		}
		c.rep.Runs += len(runs)
		if !newest.IsZero() {
			if _, err := c.dst.ClaimInstant(ctx, j.ID, newest); err != nil {
				return fmt.Errorf("copy ledger of job %s: %w", j.ID, err)
			}
			c.rep.Ledger++
		}
	}
	c.rep.Jobs = len(jobs)
	return nil
}

// webhooks copies the webhook of every channel the records named.
func (c *copier) webhooks(ctx context.Context) error {
	c.rep.ChannelsProbed = len(c.channels)
	for _, ch := range slices.Sorted(maps.Keys(c.channels)) {
		id, token, ok, err := c.src.Webhook(ctx, ch)
		if err != nil {
			return fmt.Errorf("read webhook of channel %s: %w", ch, err)
		}
		if !ok {
			continue
		}
		if err := c.dst.PutWebhook(ctx, ch, id, token); err != nil {
			return fmt.Errorf("copy webhook of channel %s: %w", ch, err)
		}
		c.rep.Webhooks++
	}
	return nil
}

// usage copies every usage record (the budgets' and /usage's history).
func (c *copier) usage(ctx context.Context) error {
	rs, err := c.src.Usage(ctx, usage.Filter{})
	if err != nil {
		return fmt.Errorf("read usage records: %w", err)
	}
	for chunk := range slices.Chunk(rs, 500) {
		if err := c.dst.AddUsage(ctx, chunk...); err != nil {
			return fmt.Errorf("copy usage records: %w", err)
		}
	}
	c.rep.Usage = len(rs)
	return nil
}

// processes copies the registry of running child process groups.
func (c *copier) processes(ctx context.Context) error {
	ps, err := c.src.Processes(ctx)
	if err != nil {
		return fmt.Errorf("read processes: %w", err)
	}
	for _, p := range ps {
		if err := c.dst.RecordProcess(ctx, p); err != nil {
			return fmt.Errorf("copy process %s: %w", p.Key(), err)
		}
	}
	c.rep.Processes = len(ps)
	return nil
}

// verify: what the target holds must be what was copied.
func (c *copier) verify(ctx context.Context) error {
	after, err := c.dst.Counts(ctx)
	if err != nil {
		return fmt.Errorf("count the target: %w", err)
	}
	r := c.rep
	for t, want := range map[string]int{"bindings": r.Bindings, "transcript_sessions": r.Sessions,
		"transcript_entries": r.Entries, "deliveries": r.Deliveries, "session_infos": r.SessionInfos,
		"jobs": r.Jobs, "job_runs": r.Runs, "job_ledger": r.Ledger, "webhooks": r.Webhooks,
		"usage_records": r.Usage, "processes": r.Processes} {
		if after[t] != int64(want) {
			return fmt.Errorf("after the copy %s holds %d rows, want %d", t, after[t], want)
		}
	}
	return nil
}
