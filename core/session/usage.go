package session

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/core/usage"
	"github.com/agentbot/agentbot/model"
)

// tally collects what the model calls behind a turn's next reply entry
// took: the model that answered last and the tokens since the previous
// entry of the turn. A nil *tally records nothing.
//
// It also holds the usage records of those calls until a write of the
// turn carries them: the next reply entry (transcript.Entry.Calls, one
// transaction with the entry), else the turn's end (flushUsage, one
// write for all that are left).
type tally struct {
	mu      sync.Mutex
	model   string
	usage   model.Usage
	calls   int
	pending []usage.Record
}

// add counts one model call's answer.
func (tl *tally) add(resp model.Response) {
	if tl == nil {
		return
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if resp.Model != "" {
		tl.model = resp.Model
	}
	tl.usage = tl.usage.Add(resp.Usage)
	tl.calls++
}

// stamp sets e's model and usage from what was counted since the last
// stamp, and starts counting afresh (a turn's next round has its own).
func (tl *tally) stamp(e *transcript.Entry) {
	if tl == nil {
		return
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if tl.calls == 0 {
		return
	}
	e.Model = tl.model
	e.Usage = &transcript.Usage{Input: tl.usage.Input, Output: tl.usage.Output}
	tl.usage, tl.calls = model.Usage{}, 0
	e.Calls, tl.pending = tl.pending, nil
}

// hold keeps rs until a write of the turn carries them: a call's
// record, or an entry's whose write failed.
func (tl *tally) hold(rs ...usage.Record) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.pending = append(tl.pending, rs...)
}

// take returns the records held and forgets them.
func (tl *tally) take() []usage.Record {
	if tl == nil {
		return nil
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	rs := tl.pending
	tl.pending = nil
	return rs
}

// lastModel is the model that answered last ("" before any answer).
func (tl *tally) lastModel() string {
	if tl == nil {
		return ""
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.model
}

// Meter is usage accounting and budgets (core/usage.Meter).
type Meter interface {
	// Stamp prices a record and sets its time (as it will be stored).
	Stamp(r usage.Record) usage.Record
	// Record stamps and stores records in one write of their own.
	Record(ctx context.Context, rs ...usage.Record) error
	// Written observes records another write stored (an entry's Calls).
	Written(rs []usage.Record)
	Check(ctx context.Context, user, place string) (usage.Decision, error)
}

// Places tells the server (Discord guild) or room a conversation belongs
// to, "" for a DM; the platform's answer, never user text.
type Places interface {
	Place(ctx context.Context, conv binding.ConversationRef) (string, error)
}

// ErrOverBudget: the acting user's or the server's usage budget
// (access.budget) is spent; the work was not started.
var ErrOverBudget = errors.New("usage budget spent")

// place is conv's server or room ("" when unknown or a DM).
func (m *Manager) place(ctx context.Context, conv binding.ConversationRef) string {
	if m.d.Places == nil || conv.ConversationID == "" {
		return ""
	}
	p, err := m.d.Places.Place(ctx, conv)
	if err != nil {
		m.d.Log.Warn().Err(err).Str("conversation", conv.ConversationID).Msg("usage: server of the conversation unknown")
	}
	return p
}

// used records one model call's usage for the work t stands for: held by
// the turn's tally for its next write (no write of its own), or written at
// once when t has no tally.
func (m *Manager) used(ctx context.Context, agent Agent, t turnInput, resp model.Response) {
	if m.d.Usage == nil {
		return
	}
	name := resp.Model
	if name == "" {
		name = agent.Model
	}
	r := usage.Record{Model: name, Agent: agent.ID, User: t.requester, Place: m.place(ctx, t.conv),
		Conversation: t.conv.ConversationID, SessionKey: t.key, Run: t.deliveryID,
		Input: resp.Usage.Input, Output: resp.Usage.Output, Cached: resp.Usage.Cached}
	if r.Run == "" {
		r.Run = t.key
	}
	if t.tally != nil {
		t.tally.hold(m.d.Usage.Stamp(r))
		return
	}
	if err := m.d.Usage.Record(ctx, r); err != nil {
		m.d.Log.Error().Err(err).Str("session", t.key).Msg("usage not recorded")
	}
}

// usageFlushTimeout bounds the write of a turn's last usage records when
// its context has ended (a stop, shutdown).
const usageFlushTimeout = 5 * time.Second

// flushUsage writes the usage records t's tally still holds (calls no
// entry carried: a turn without a reply, a failed reply write, a
// subagent's run) in one write. It runs after the turn's context may have
// ended, so it has its own bounded one.
func (m *Manager) flushUsage(ctx context.Context, t turnInput) {
	rs := t.tally.take()
	if len(rs) == 0 || m.d.Usage == nil {
		return
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), usageFlushTimeout)
	defer cancel()
	if err := m.d.Usage.Record(fctx, rs...); err != nil {
		m.d.Log.Error().Err(err).Str("session", t.key).Int("calls", len(rs)).Msg("usage not recorded")
	}
}

// appendWithCalls appends e, which may carry its calls' usage records
// (tally.stamp): written with it, they are observed; when the write
// failed, tl holds them again for the turn's next write.
func (m *Manager) appendWithCalls(ctx context.Context, key string, e transcript.Entry, tl *tally) error {
	_, err := m.d.Transcripts.Append(ctx, key, e)
	switch {
	case len(e.Calls) == 0:
	case err != nil:
		tl.hold(e.Calls...)
	case m.d.Usage != nil:
		m.d.Usage.Written(e.Calls)
	}
	return err
}

// budget checks the usage budget before work for t starts. refused work
// gets notice ("" for a silent refusal: the user was told already).
func (m *Manager) budget(ctx context.Context, t turnInput) (notice string, refused bool) {
	if m.d.Usage == nil {
		return "", false
	}
	d, err := m.d.Usage.Check(ctx, t.requester, m.place(ctx, t.conv))
	if err != nil {
		m.d.Log.Warn().Err(err).Str("session", t.key).Msg("usage budget unreadable; the work goes on")
	}
	if d.OK {
		return "", false
	}
	m.d.Log.Info().Str("session", t.key).Str("user", t.requester).Str("scope", d.Scope).Time("until", d.Until).
		Bool("notice", d.Notify).Msg("usage budget spent: work refused")
	if !d.Notify {
		return "", true
	}
	who := "your"
	if d.Scope == "server" {
		who = "this server's"
	}
	wait := max(d.Until.Sub(m.d.Clock.Now()).Round(time.Minute), time.Minute)
	return fmt.Sprintf("⏳ %s usage budget (%s) is spent; I can answer again in %s (at %s UTC). Until then I will not answer.",
		who, d.Limit, FormatDuration(wait), d.Until.UTC().Format("15:04")), true
}

// withFooter ends a model's reply with the footer naming the model that
// answered, when the agent's model has models.*.footer.
func (m *Manager) withFooter(t turnInput, text string) string {
	name := t.tally.lastModel()
	if !m.agentFor(t.key).Footer || name == "" || strings.TrimSpace(text) == "" {
		return text
	}
	return text + "\n\n— " + name
}

// refuseOverBudget ends a turn the budget refused: the notice (once) as
// its reply, then done with ErrOverBudget.
func (m *Manager) refuseOverBudget(ctx context.Context, t turnInput, notice string) {
	var ids []string
	if notice != "" {
		var err error
		if ids, err = m.replyWaitingForStore(ctx, t, notice, transcript.SourceNotice); err != nil {
			m.d.Log.Error().Err(err).Str("session", t.key).Msg("budget notice not delivered")
		}
	}
	if t.done != nil {
		t.done(ids, ErrOverBudget)
	}
}
