package acp

import (
	"context"
	"fmt"
	"strings"

	"unicode/utf8"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/transcript"
)

// maxMessage is Discord's message length (runes).
const maxMessage = 2000

// liveMsg is one displayed message of a turn: a core/delivery live
// message (its own outbox record and entry), created when it first has
// text.
type liveMsg struct {
	n       int
	text    string // what it should display
	buttons []delivery.Button
	files   []delivery.File // attached to its post (a command's full output)
	live    *delivery.Live  // nil until it has text
	// tool call state
	title  string
	status sdk.ToolCallStatus
}

func (t *turn) newMsg(text string, buttons []delivery.Button) *liveMsg {
	lm := &liveMsg{n: len(t.msgs), text: text, buttons: buttons}
	t.msgs = append(t.msgs, lm)
	return lm
}

// deliveryID is the outbox id of the turn's n-th message.
func (t *turn) deliveryID(n int) string { return fmt.Sprintf("acp:%s:%s:%d", t.s.rec.Key, t.seq, n) }

// show hands lm's latest text to its live message, which posts it (the
// first time) or edits it, paced (Options.EditInterval per message). A
// new message is posted only after every earlier one of the turn was
// (Posted), so the thread shows them in creation order.
func (t *turn) show(ctx context.Context, lm *liveMsg) {
	if lm.live != nil {
		lm.live.Update(lm.text)
		return
	}
	if strings.TrimSpace(lm.text) == "" {
		return
	}
	t.posted(ctx)
	m := t.s.m
	if t.release == nil {
		// The turn owns the thread's send lock from its first post until
		// its entries are written (finish).
		t.release = m.d.Live.Hold(t.s.rec.Conversation)
	}
	d := delivery.Delivery{ID: t.deliveryID(lm.n), Target: t.s.rec.Conversation, Files: lm.files,
		Producer: delivery.Producer{Source: transcript.SourceTurn, AgentID: t.s.ac.Name, Session: t.key, Meta: map[string]string{"acpAgent": t.s.ac.Name}}}
	lm.live = m.d.Live.Live(ctx, d, delivery.LiveOptions{Controls: delivery.Controls{Buttons: lm.buttons}, NoSendLock: true,
		Interval: m.opt.EditInterval, After: m.opt.After, Pacer: t.pacer})
	lm.live.Update(lm.text)
	if err := lm.live.Posted(ctx); err != nil {
		m.log.Debug().Err(err).Str("session", t.s.rec.Key).Msg("acp live message: not waiting for its post")
	}
}

// posted waits until every message of the turn is posted (t.mu held).
func (t *turn) posted(ctx context.Context) {
	for _, lm := range t.msgs {
		if lm.live != nil {
			_ = lm.live.Posted(ctx)
		}
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
		t.show(ctx, lm)
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
		t.show(ctx, lm)
	case u.Plan != nil:
		if t.plan == nil {
			t.endText(ctx)
			t.plan = t.newMsg("", nil)
		}
		t.plan.text = planLine(u.Plan.Entries)
		t.show(ctx, t.plan)
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
			t.show(ctx, t.text)
			return
		}
		t.text.text += string(r[:room])
		t.show(ctx, t.text)
		t.text = nil
		s = string(r[room:])
	}
}

// endText closes the answer segment: later chunks go to a new message
// below whatever is posted next.
func (t *turn) endText(ctx context.Context) {
	t.text = nil
}

// line posts a status line of the turn (a notice that it ended, ...).
func (t *turn) line(ctx context.Context, text string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.text = nil
	t.show(ctx, t.newMsg(truncate(text, maxMessage), nil))
}

// finish shows every message's final text and ends each one, in display
// order: core/delivery writes its entry once, with the text it displays,
// after the last edit is confirmed (a crash before that leaves the record
// to Outbound.Recover, which finishes and writes it). The error is the
// first message that could not be finished.
func (t *turn) finish(ctx context.Context) error {
	t.endCommands()
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
	// Every final edit starts now (each paced on its own), then each
	// message is finished in order.
	for _, lm := range t.msgs {
		if lm.live != nil {
			lm.live.Update(lm.text)
		}
	}
	m := t.s.m
	defer func() {
		if t.release != nil {
			t.release()
			t.release = nil
		}
	}()
	var first error
	for _, lm := range t.msgs {
		if lm.live == nil {
			if strings.TrimSpace(lm.text) != "" && first == nil {
				first = fmt.Errorf("message %d was never posted", lm.n)
			}
			continue
		}
		if _, err := lm.live.Finish(ctx, lm.text); err != nil {
			m.log.Error().Err(err).Str("session", t.s.rec.Key).Str("delivery", t.deliveryID(lm.n)).Msg("acp turn message not finished")
			if first == nil {
				first = err
			}
		}
	}
	return first
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
	p := &pendingPerm{binder: t.s.rec.BoundBy, users: t.s.ac.Users, roles: t.s.ac.Roles, options: r.Options, answer: make(chan choice, 1)}
	buttons := make([]delivery.Button, 0, len(r.Options))
	for i, o := range r.Options {
		if i == 25 { // Discord: 5 rows of 5 buttons
			break
		}
		style := delivery.ButtonPrimary
		if o.Kind == sdk.PermissionOptionKindRejectOnce || o.Kind == sdk.PermissionOptionKindRejectAlways {
			style = delivery.ButtonDanger
		}
		buttons = append(buttons, delivery.Button{CustomID: delivery.PermissionButton(id, i), Label: truncate(o.Name, 80), Style: style})
	}
	title := "a tool call"
	if r.ToolCall.Title != nil && *r.ToolCall.Title != "" {
		title = *r.ToolCall.Title
	} else if lm := t.tools[r.ToolCall.ToolCallId]; lm != nil && lm.title != "" {
		title = lm.title
	}
	t.text = nil
	lm := t.newMsg(truncate(fmt.Sprintf("🔐 **%s** asks permission: %s", t.s.ac.Name, title), 1800), buttons)
	// Registered before it is shown: a click can come as soon as the
	// buttons are displayed.
	t.perms[id] = p
	m.mu.Lock()
	m.perms[id] = p
	m.mu.Unlock()
	t.show(ctx, lm)
	posted := lm.live != nil && lm.live.Shown() != ""
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
	if lm.live != nil {
		// Also when its post failed for now: a retried post must not show
		// buttons for a request already answered.
		lm.text = truncate(lm.text+"\n→ "+result, maxMessage)
		lm.buttons = nil
		lm.live.SetControls(delivery.Controls{})
		t.show(context.WithoutCancel(ctx), lm)
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
