package audit

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/sessionkey"
	"github.com/agentbot/agentbot/core/transcript"
)

// Transcripts is what the audit reads of the store.
type Transcripts interface {
	Sessions(ctx context.Context) ([]string, error)
	Tail(ctx context.Context, key string, n int) ([]transcript.Entry, error)
}

// Target names a conversation for a Display.
type Target struct {
	Platform string // sessionkey.PlatformDiscord, sessionkey.PlatformMatrix
	ID       string // the conversation id, as entries' displayedIn names it
	Parent   string // a thread's parent (a Matrix thread's room), when known
}

// Display reads what a platform displays now.
type Display interface {
	// Read returns t's newest messages back to message oldest
	// (inclusive), at most limit of them, oldest first; with oldest ""
	// the newest limit. It may return messages of other conversations
	// (a Matrix room's threads): the audit keeps t's.
	Read(ctx context.Context, t Target, oldest string, limit int) ([]Message, error)
}

// Outbox is the delivery outbox: the audit excuses the messages of sends
// still in flight (a streamed reply's entry is written when it ends) and
// of Rule 1 exceptions (sent with no entry, by design).
type Outbox interface {
	Deliveries(ctx context.Context, state delivery.PendingState, limit int) ([]delivery.Record, error)
}

// outboxScan bounds the outbox records read per audit.
const outboxScan = 2000

// Options are an Auditor's settings.
type Options struct {
	Every    time.Duration // the periodic audit's interval; 0: Run audits nothing
	Window   int           // newest entries read per session (default 100)
	Messages int           // messages read per conversation at most (default 500)
	// Grace is how recent a bot message may be and still be held to no
	// entry (default 10s): between the platform's confirmation and the
	// outbox recording it, a send is displayed and known nowhere.
	Grace time.Duration
}

// Deps are what an Auditor works with.
type Deps struct {
	Transcripts Transcripts
	Displays    map[string]Display // by platform
	Outbox      Outbox             // nil: no message is excused
	Clock       clock.Clock        // nil: the real clock
	Log         zerolog.Logger
	// Count records the differences one periodic audit found, by kind
	// (a metric); nil records nothing.
	Count func(k Kind, n int)
	// Ticks starts the periodic audit's ticker (nil: time.NewTicker).
	Ticks func(d time.Duration) (<-chan time.Time, func())
}

// Report is one conversation's audit.
type Report struct {
	Target Target
	At     time.Time
	Rows   []Row
}

// Differences returns the rows that differ.
func (r Report) Differences() []Row { return Differences(r.Rows) }

// Auditor compares conversations' transcripts with their platforms.
type Auditor struct {
	o Options
	d Deps
}

// New returns an Auditor. It does no I/O.
func New(o Options, d Deps) *Auditor {
	if o.Window <= 0 {
		o.Window = 100
	}
	if o.Messages <= 0 {
		o.Messages = 500
	}
	if o.Grace <= 0 {
		o.Grace = 10 * time.Second
	}
	if d.Clock == nil {
		d.Clock = clock.Real{}
	}
	if d.Ticks == nil {
		d.Ticks = func(d time.Duration) (<-chan time.Time, func()) {
			t := time.NewTicker(d)
			return t.C, t.Stop
		}
	}
	return &Auditor{o: o, d: d}
}

// ErrUnknownConversation: no transcript entry in the window is displayed
// in the conversation.
var ErrUnknownConversation = errors.New("no transcript holds a message of this conversation")

// Conversation audits one conversation (a channel, thread or room id).
func (a *Auditor) Conversation(ctx context.Context, id string) (Report, error) {
	convs, err := a.gather(ctx)
	if err != nil {
		return Report{}, err
	}
	c, ok := convs[id]
	if !ok {
		return Report{}, fmt.Errorf("audit %s: %w (give a channel, thread or room id the bot has posted in)", id, ErrUnknownConversation)
	}
	excused, err := a.excused(ctx)
	if err != nil {
		return Report{}, err
	}
	return a.audit(ctx, c, excused)
}

// All audits every conversation the transcripts' windows display in,
// sorted by conversation id. A conversation whose platform cannot be read
// is an error naming it; the others are still audited.
func (a *Auditor) All(ctx context.Context) ([]Report, error) {
	convs, err := a.gather(ctx)
	if err != nil {
		return nil, err
	}
	excused, err := a.excused(ctx)
	if err != nil {
		return nil, err
	}
	var out []Report
	var errs []error
	for _, id := range slices.Sorted(maps.Keys(convs)) {
		r, err := a.audit(ctx, convs[id], excused)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, r)
	}
	return out, errors.Join(errs...)
}

// Run audits every conversation each Options.Every until ctx ends, logging
// each difference and counting them; with Every 0 it returns at once.
func (a *Auditor) Run(ctx context.Context) error {
	if a.o.Every <= 0 {
		return nil
	}
	ticks, stop := a.d.Ticks(a.o.Every)
	defer stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticks:
			a.once(ctx)
		}
	}
}

// once is one periodic audit.
func (a *Auditor) once(ctx context.Context) {
	reports, err := a.All(ctx)
	if err != nil {
		a.d.Log.Warn().Err(err).Msg("audit: some conversations could not be read")
	}
	counts := map[Kind]int{}
	for _, r := range reports {
		for _, d := range r.Differences() {
			counts[d.Diff]++
			a.d.Log.Warn().Str("conversation", r.Target.ID).Str("message", d.MessageID).Str("difference", string(d.Diff)).
				Msg("audit: " + d.Detail)
		}
	}
	if a.d.Count != nil {
		for _, k := range []Kind{Missing, Extra, Text, Order, Undeleted} {
			a.d.Count(k, counts[k])
		}
	}
}

// conv is a conversation and the entries displayed in it.
type conv struct {
	target  Target
	entries []transcript.Folded
}

// gather reads every session's window and groups its entries by the
// conversation that displays them.
func (a *Auditor) gather(ctx context.Context) (map[string]*conv, error) {
	keys, err := a.d.Transcripts.Sessions(ctx)
	if err != nil {
		return nil, fmt.Errorf("audit: list sessions: %w", err)
	}
	out := map[string]*conv{}
	for _, key := range keys {
		tail, err := a.d.Transcripts.Tail(ctx, key, a.o.Window)
		if err != nil {
			return nil, fmt.Errorf("audit: read %s: %w", key, err)
		}
		_, own, isOwn := sessionkey.ConversationOf(key)
		for _, f := range transcript.Fold(tail) {
			if f.IsChange() || len(f.MessageIDs) == 0 {
				continue
			}
			id, known := f.Meta[transcript.MetaDisplayedIn]
			if !known && isOwn {
				id = own.ConversationID
			}
			if id == "" {
				continue
			}
			c := out[id]
			if c == nil {
				c = &conv{target: Target{Platform: PlatformOf(id), ID: id}}
				out[id] = c
			}
			if isOwn && own.ConversationID == id {
				c.target.Parent = own.ParentConversationID
			}
			c.entries = append(c.entries, f)
		}
	}
	return out, nil
}

// audit reads c's display from the window's oldest entry on and compares;
// excused messages are shown and held to no entry.
func (a *Auditor) audit(ctx context.Context, c *conv, excused map[string]bool) (Report, error) {
	d := a.d.Displays[c.target.Platform]
	if d == nil {
		return Report{}, fmt.Errorf("audit %s: the bot has no %s connection configured", c.target.ID, c.target.Platform)
	}
	entries := c.entries
	slices.SortStableFunc(entries, func(x, y transcript.Folded) int { return x.At.Compare(y.At) })
	oldest := entries[0].MessageIDs[0]
	msgs, err := d.Read(ctx, c.target, oldest, a.o.Messages)
	if err != nil {
		return Report{}, fmt.Errorf("audit %s: read the %s history: %w", c.target.ID, c.target.Platform, err)
	}
	shown := msgs[:0:0]
	now := a.d.Clock.Now()
	for _, m := range msgs {
		if m.Conversation == c.target.ID {
			if excused[m.ID] || (m.FromBot && now.Sub(m.At) < a.o.Grace) {
				m.FromBot, m.Addressed = false, false // shown, held to no entry
			}
			shown = append(shown, m)
		}
	}
	// Past the messages read, entries are not judged.
	if len(msgs) >= a.o.Messages && len(msgs) > 0 && msgs[0].ID != oldest {
		from := msgs[0].At
		entries = slices.DeleteFunc(slices.Clone(entries), func(f transcript.Folded) bool { return f.At.Before(from) })
	}
	return Report{Target: c.target, At: a.d.Clock.Now(), Rows: Compare(entries, shown)}, nil
}

// excused are the message ids of the newest outbox records that are in
// flight (pending, or sent and not yet committed) or Rule 1 exceptions.
func (a *Auditor) excused(ctx context.Context) (map[string]bool, error) {
	out := map[string]bool{}
	if a.d.Outbox == nil {
		return out, nil
	}
	recs, err := a.d.Outbox.Deliveries(ctx, "", outboxScan)
	if err != nil {
		return nil, fmt.Errorf("audit: read the outbox: %w", err)
	}
	for _, r := range recs {
		if r.State == delivery.StatePending || r.State == delivery.StateSent || (r.State == delivery.StateDelivered && delivery.IsException(r.Reason)) {
			for _, id := range r.MessageIDs {
				out[id] = true
			}
		}
	}
	return out, nil
}

// PlatformOf is the platform a conversation id belongs to, from its shape:
// Matrix ids carry a sigil (!room, $event, user:@user); Discord's are
// snowflakes.
func PlatformOf(id string) string {
	if strings.HasPrefix(id, "!") || strings.HasPrefix(id, "$") || strings.HasPrefix(id, sessionkey.DMPrefix+"@") {
		return sessionkey.PlatformMatrix
	}
	return sessionkey.PlatformDiscord
}
