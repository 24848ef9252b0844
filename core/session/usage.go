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
type tally struct {
	mu    sync.Mutex
	model string
	usage model.Usage
	calls int
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
	Record(ctx context.Context, r usage.Record) error
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

// used records one model call's usage for the work t stands for.
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
	if err := m.d.Usage.Record(ctx, r); err != nil {
		m.d.Log.Error().Err(err).Str("session", t.key).Msg("usage not recorded")
	}
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
