package acp

import (
	"context"
	"fmt"
	"strings"

	"time"
	"unicode/utf8"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agentbot/agentbot/core/transcript"
)

// maxMessage is Discord's message length (runes).
const maxMessage = 2000

// liveMsg is one displayed message of a turn.
type liveMsg struct {
	n       int
	text    string // what it should display
	buttons []Button
	msgID   string // "" until posted
	shown   string // what it displays now
	shownB  int    // how many buttons it displays now
	edited  time.Time
	// flushing: an edit is scheduled for when the interval has passed.
	flushing bool
	// tool call state
	title  string
	status sdk.ToolCallStatus
}

func (t *turn) newMsg(text string, buttons []Button) *liveMsg {
	lm := &liveMsg{n: len(t.msgs), text: text, buttons: buttons}
	t.msgs = append(t.msgs, lm)
	return lm
}

// show brings lm's display up to date: a post the first time (once it has
// text), then edits, at most one per EditInterval unless force.
func (t *turn) show(ctx context.Context, lm *liveMsg, force bool) {
	m := t.s.m
	conv := t.s.rec.Conversation
	if lm.msgID == "" {
		if strings.TrimSpace(lm.text) == "" {
			return
		}
		id, err := m.d.Live.Post(ctx, conv, fmt.Sprintf("acp:%s:%s:%d", t.s.rec.Key, t.seq, lm.n), lm.text, lm.buttons)
		if err != nil {
			m.log.Warn().Err(err).Str("session", t.s.rec.Key).Msg("acp live message not posted")
			return
		}
		lm.msgID, lm.shown, lm.shownB, lm.edited = id, lm.text, len(lm.buttons), m.d.Clock.Now()
		return
	}
	if lm.text == lm.shown && len(lm.buttons) == lm.shownB || strings.TrimSpace(lm.text) == "" {
		return
	}
	now := m.d.Clock.Now()
	if wait := m.opt.EditInterval - now.Sub(lm.edited); !force && wait > 0 {
		// Shown when the interval has passed (or at the next forced show).
		if !lm.flushing {
			lm.flushing = true
			timer := m.opt.After(wait)
			go func() {
				<-timer
				t.mu.Lock()
				defer t.mu.Unlock()
				lm.flushing = false
				if !t.closed {
					t.show(ctx, lm, true)
				}
			}()
		}
		return
	}
	if err := m.d.Live.Edit(ctx, conv, lm.msgID, lm.text, lm.buttons); err != nil {
		m.log.Warn().Err(err).Str("session", t.s.rec.Key).Msg("acp live message not edited")
		return
	}
	lm.shown, lm.shownB, lm.edited = lm.text, len(lm.buttons), now
}

// flush shows every message's latest text (t.mu held).
func (t *turn) flush(ctx context.Context) {
	for _, lm := range t.msgs {
		t.show(ctx, lm, true)
	}
}

// update renders one session/update.
func (t *turn) update(ctx context.Context, u sdk.SessionUpdate) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case u.AgentMessageChunk != nil:
		if c := u.AgentMessageChunk.Content; c.Text != nil {
			t.chunk(ctx, c.Text.Text)
		}
	case u.ToolCall != nil:
		tc := u.ToolCall
		t.endText(ctx)
		lm := t.tools[tc.ToolCallId]
		if lm == nil {
			lm = t.newMsg("", nil)
			t.tools[tc.ToolCallId] = lm
		}
		lm.title, lm.status = tc.Title, tc.Status
		lm.text = toolLine(lm.title, lm.status)
		t.show(ctx, lm, true)
	case u.ToolCallUpdate != nil:
		tu := u.ToolCallUpdate
		lm := t.tools[tu.ToolCallId]
		if lm == nil {
			// An update for a tool call never announced: shown as its own
			// line rather than dropped (the agent is working on something).
			t.s.m.log.Debug().Str("session", t.s.rec.Key).Str("toolCall", string(tu.ToolCallId)).Msg("acp tool_call_update for an unannounced id")
			t.endText(ctx)
			lm = t.newMsg("", nil)
			lm.title = "tool call " + string(tu.ToolCallId)
			t.tools[tu.ToolCallId] = lm
		}
		if tu.Title != nil && *tu.Title != "" {
			lm.title = *tu.Title
		}
		if tu.Status != nil {
			lm.status = *tu.Status
		}
		lm.text = toolLine(lm.title, lm.status)
		final := lm.status == sdk.ToolCallStatusCompleted || lm.status == sdk.ToolCallStatusFailed
		t.show(ctx, lm, final)
	case u.Plan != nil:
		if t.plan == nil {
			t.endText(ctx)
			t.plan = t.newMsg("", nil)
		}
		t.plan.text = planLine(u.Plan.Entries)
		t.show(ctx, t.plan, false)
	}
}

// chunk appends answer text; past Discord's length the answer continues
// in a new message.
func (t *turn) chunk(ctx context.Context, s string) {
	for s != "" {
		if t.text == nil {
			t.text = t.newMsg("", nil)
		}
		room := maxMessage - utf8.RuneCountInString(t.text.text)
		r := []rune(s)
		if len(r) <= room {
			t.text.text += s
			t.show(ctx, t.text, false)
			return
		}
		t.text.text += string(r[:room])
		t.show(ctx, t.text, true)
		t.text = nil
		s = string(r[room:])
	}
}

// endText closes the answer segment: later chunks go to a new message
// below whatever is posted next.
func (t *turn) endText(ctx context.Context) {
	if t.text != nil {
		t.show(ctx, t.text, true)
		t.text = nil
	}
}

// line posts a status line of the turn (a notice that it ended, ...).
func (t *turn) line(ctx context.Context, text string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.flush(ctx)
	t.text = nil
	t.show(ctx, t.newMsg(truncate(text, maxMessage), nil), true)
}

// finish shows every message's final text and writes each displayed
// message once into the session's transcript, in display order.
func (t *turn) finish(ctx context.Context) {
	// A permission request answered as the turn ended shows its answer
	// before its entry is written.
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.resolvePerms()
	t.permWG.Wait()
	t.mu.Lock()
	defer t.mu.Unlock()
	ctx = context.WithoutCancel(ctx)
	t.flush(ctx)
	m := t.s.m
	for _, lm := range t.msgs {
		if lm.msgID == "" {
			continue
		}
		_, err := m.d.Transcripts.Append(ctx, t.s.rec.Key, transcript.Entry{Role: transcript.RoleAssistant, Author: t.s.ac.Name, Text: lm.shown,
			MessageIDs: []string{lm.msgID}, Source: transcript.SourceTurn, DeliveryID: fmt.Sprintf("acp:%s:%s:%d", t.s.rec.Key, t.seq, lm.n),
			Meta: map[string]string{"acpAgent": t.s.ac.Name}})
		if err != nil {
			m.log.Error().Err(err).Str("session", t.s.rec.Key).Msg("acp turn entry not written")
		}
	}
}

// permission shows the request with one button per option and waits for
// the binder's or an operator's click, the timeout (a reject) or the
// turn's cancellation.
func (t *turn) permission(ctx context.Context, r sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
	m := t.s.m
	cancelled := sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeCancelled()}
	t.mu.Lock()
	if t.cancelled || t.closed {
		t.mu.Unlock()
		return cancelled, nil
	}
	t.permWG.Add(1)
	defer t.permWG.Done()
	id := newID()
	p := &pendingPerm{binder: t.s.rec.BoundBy, options: r.Options, answer: make(chan choice, 1)}
	buttons := make([]Button, 0, len(r.Options))
	for i, o := range r.Options {
		if i == 25 { // Discord: 5 rows of 5 buttons
			break
		}
		buttons = append(buttons, Button{ID: fmt.Sprintf("acp:%s:%d", id, i), Label: truncate(o.Name, 80),
			Danger: o.Kind == sdk.PermissionOptionKindRejectOnce || o.Kind == sdk.PermissionOptionKindRejectAlways})
	}
	title := "a tool call"
	if r.ToolCall.Title != nil && *r.ToolCall.Title != "" {
		title = *r.ToolCall.Title
	} else if lm := t.tools[r.ToolCall.ToolCallId]; lm != nil && lm.title != "" {
		title = lm.title
	}
	t.flush(ctx)
	t.text = nil
	lm := t.newMsg(truncate(fmt.Sprintf("🔐 **%s** asks permission: %s", t.s.ac.Name, title), 1800), buttons)
	// Registered before it is shown: a click can come as soon as the
	// buttons are displayed.
	t.perms[id] = p
	m.mu.Lock()
	m.perms[id] = p
	m.mu.Unlock()
	t.show(ctx, lm, true)
	posted := lm.msgID != ""
	t.mu.Unlock()

	var outcome sdk.RequestPermissionResponse
	var result string
	if !posted {
		outcome, result = reject(r.Options, "")
	} else {
		select {
		case c := <-p.answer:
			if c.index < 0 {
				outcome, result = cancelled, "⏹️ Cancelled."
			} else {
				o := r.Options[c.index]
				outcome = sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeSelected(o.OptionId)}
				mark := "✅"
				if o.Kind == sdk.PermissionOptionKindRejectOnce || o.Kind == sdk.PermissionOptionKindRejectAlways {
					mark = "🚫"
				}
				result = fmt.Sprintf("%s %s (<@%s>)", mark, o.Name, c.by)
			}
		case <-m.opt.After(m.opt.PermissionTimeout):
			outcome, result = reject(r.Options, fmt.Sprintf("⏱️ No answer within %s: ", m.opt.PermissionTimeout))
		case <-ctx.Done():
			outcome, result = cancelled, "⏹️ Withdrawn by the agent."
			if t.wasCancelled() {
				result = "⏹️ Cancelled."
			}
		}
	}
	m.mu.Lock()
	delete(m.perms, id)
	m.mu.Unlock()
	t.mu.Lock()
	delete(t.perms, id)
	if posted {
		lm.text = truncate(lm.text+"\n→ "+result, maxMessage)
		lm.buttons = nil
		t.show(context.WithoutCancel(ctx), lm, true)
	}
	t.mu.Unlock()
	return outcome, nil
}

// reject picks the request's reject option (once, else always); with
// none, the request is answered "cancelled".
func reject(opts []sdk.PermissionOption, prefix string) (sdk.RequestPermissionResponse, string) {
	for _, kind := range []sdk.PermissionOptionKind{sdk.PermissionOptionKindRejectOnce, sdk.PermissionOptionKindRejectAlways} {
		for _, o := range opts {
			if o.Kind == kind {
				return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeSelected(o.OptionId)}, prefix + "🚫 " + o.Name
			}
		}
	}
	return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeCancelled()}, prefix + "🚫 declined"
}

func toolLine(title string, st sdk.ToolCallStatus) string {
	if title == "" {
		title = "tool call"
	}
	state := "⏳ pending"
	switch st {
	case sdk.ToolCallStatusInProgress:
		state = "🔄 running"
	case sdk.ToolCallStatusCompleted:
		state = "✅ done"
	case sdk.ToolCallStatusFailed:
		state = "❌ failed"
	}
	return truncate("🔧 "+strings.ReplaceAll(title, "\n", " ")+" · "+state, maxMessage)
}

func planLine(entries []sdk.PlanEntry) string {
	var b strings.Builder
	b.WriteString("📋 Plan")
	for _, e := range entries {
		mark := "⬜"
		switch e.Status {
		case sdk.PlanEntryStatusInProgress:
			mark = "🔄"
		case sdk.PlanEntryStatusCompleted:
			mark = "✅"
		}
		b.WriteString("\n" + mark + " " + strings.ReplaceAll(e.Content, "\n", " "))
	}
	return truncate(b.String(), maxMessage)
}
