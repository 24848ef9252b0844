package session

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/model"
)

// LiveOutbound is the outbound owner's live messages
// (core/delivery.Outbound.Live): a streamed reply goes through the same
// send owner as every other message.
type LiveOutbound interface {
	Live(ctx context.Context, d delivery.Delivery, opt delivery.LiveOptions) *delivery.Live
}

// liveTargets says whether a destination can show live messages
// (core/delivery.Outbound.LiveTo: its platform's sender is a LiveSender).
type liveTargets interface {
	LiveTo(target binding.ConversationRef) bool
}

// streaming reports whether t's reply streams: the agent's model streams
// (models.<name>.stream and a model.Streamer), the outbound owner shows
// live messages in t's conversation, and the reply is posted as the bot (a
// webhook persona's reply is sent whole).
func (m *Manager) streaming(agent Agent, t turnInput) (LiveOutbound, model.Streamer, bool) {
	if !agent.Stream {
		return nil, nil, false
	}
	sp, ok := agent.Provider.(model.Streamer)
	if !ok {
		return nil, nil, false
	}
	lo, ok := m.d.Outbound.(LiveOutbound)
	if !ok {
		return nil, nil, false
	}
	if lt, ok := lo.(liveTargets); ok && !lt.LiveTo(t.conv) {
		return nil, nil, false // this platform's sender shows no live messages: the reply is sent whole
	}
	if _, webhook := m.persona(t.key, t.bindingID != ""); webhook {
		return nil, nil, false
	}
	return lo, sp, true
}

// streamTurn runs a turn whose reply streams into a live message: the
// text of each model round is shown as it arrives (tool-call arguments
// never are). A round that ends in tool calls closes its live message
// with the complete text it showed (its own entry, delivery id
// "<turn>#<n>"), so tools that post in the conversation post after it;
// the next round's text starts a new one. /stop or the Stop button keeps
// what is displayed; a model error mid-stream ends the message with a
// notice after what was shown. Each live message's entry is written once,
// when its last edit is confirmed.
//
// The watch of the turn's message (unwatch, from watchTrigger on wctx) ends
// when the first text is about to be displayed: from then on the reply
// stands, and a change of the message is one of an answered message. A
// deletion or edit before that ends the attempt with nothing displayed and
// is returned (errDeleted, errEdited) for runTurn to handle as a
// non-streamed turn's; nil means the turn is over (done was called).
func (m *Manager) streamTurn(ctx, wctx context.Context, end func(), unwatch func(proceed bool) error, lo LiveOutbound, sp model.Streamer, agent Agent, t turnInput, history []transcript.Entry, stopTyping func()) error {
	mctx, cancel := context.WithCancelCause(wctx)
	defer cancel(nil)
	watching := true
	var changed error
	// show ends the watch before the first text is displayed; false: the
	// message changed first, and nothing may be shown.
	show := func() bool {
		if watching {
			watching = false
			if changed = unwatch(true); changed != nil {
				cancel(changed)
			}
		}
		return changed == nil
	}
	run, _ := m.Running(t.key)
	author := agent.Name
	n := 0
	var ids []string
	id := func() string { return roundID(t.deliveryID, n) }
	open := func() *delivery.Live {
		d := delivery.Delivery{ID: id(), Target: t.conv, ReplyTo: t.replyTo, BindingID: t.bindingID,
			Producer: delivery.Producer{Source: transcript.SourceTurn, TurnSessionKey: t.key, AgentID: agent.ID}}
		if n > 0 {
			d.ReplyTo = ""
		}
		return lo.Live(ctx, d, delivery.LiveOptions{
			Controls: delivery.Controls{StopRun: strconv.FormatUint(run.ID, 10)},
			Commit:   m.commitReply(t.key, author, transcript.SourceTurn, d.ID, t.tally),
			After:    m.opt.LiveAfter,
		})
	}
	noteFinished := func(res delivery.Result, err error) error {
		ids = append(ids, res.MessageIDs...)
		if err != nil {
			m.d.Log.Error().Err(err).Str("session", t.key).Msg("streamed reply not delivered")
		}
		return err
	}
	finish := func(l *delivery.Live, text string) error { return noteFinished(l.Finish(ctx, text)) }
	live := open()
	req := model.Request{System: m.systemPrompt(agent, t.key), Messages: m.toMessages(ctx, t, history)}
	if agent.MaxToolSteps > 0 {
		req.Tools = append(turnTools(m.tools(t.key), t), m.toolboxTools(ctx, agent, t)...)
	}
	var text string
	var err error
	for step := 0; ; step++ {
		var acc strings.Builder
		onText := func(delta string) {
			if acc.Len() == 0 && strings.TrimSpace(delta) != "" {
				if !show() {
					return
				}
				stopTyping() // the reply ends the indicator
			}
			if changed != nil {
				return
			}
			acc.WriteString(delta)
			live.Update(acc.String())
		}
		var resp model.Response
		resp, err = sp.Stream(mctx, req, onText)
		if err != nil {
			text = acc.String()
			break
		}
		t.tally.add(resp)
		m.used(ctx, agent, t, resp)
		if len(resp.ToolCalls) == 0 || step >= agent.MaxToolSteps {
			text = resp.Text
			if len(resp.ToolCalls) > 0 && strings.TrimSpace(text) == "" {
				err = fmt.Errorf("%w (%d)", errToolSteps, agent.MaxToolSteps)
			}
			break
		}
		if strings.TrimSpace(resp.Text) != "" {
			if !show() {
				break
			}
			// A complete round's text stays shown, as its own message;
			// the turn's record says first that its last delivery is the
			// next round's (turnstate.go).
			m.markRounds(ctx, t.key, t.deliveryID, n+1)
			_ = finish(live, resp.Text)
			n++
			live = open()
		}
		if sideEffects(resp.ToolCalls, req.Tools) && !show() {
			// The message changed before a tool with effects ran: the
			// attempt ends here (once past this, it stands: an edit no
			// longer runs it again, so no effect happens twice).
			break
		}
		req.Messages = append(req.Messages, model.Message{Role: model.RoleAssistant, Text: resp.Text, ToolCalls: resp.ToolCalls})
		for _, call := range resp.ToolCalls {
			out := m.runTool(mctx, t, req.Tools, call)
			req.Messages = append(req.Messages, model.Message{Role: model.RoleTool, Text: out, ToolCallID: call.ID, Name: call.Name})
		}
	}
	wasStopped := stopped(mctx)
	if watching {
		// Nothing was displayed: the watch ends as a non-streamed turn's.
		watching = false
		changed = unwatch(!wasStopped)
	}
	if changed != nil {
		end()
		_ = finish(live, "") // nothing of this attempt was displayed
		return changed
	}
	end()
	stopTyping()
	var turnErr error
	switch {
	case wasStopped:
		// What was displayed stays, and is what the entry records.
		m.d.Log.Info().Str("session", t.key).Msg("turn stopped")
		_ = noteFinished(live.FinishShown(ctx))
		turnErr = ErrStopped
	case err != nil:
		m.d.Log.Error().Err(err).Str("session", t.key).Msg("turn failed")
		turnErr = fmt.Errorf("%w: %w", ErrTurnFailed, err)
		notice := "⚠️ " + noticeText(err)
		if strings.TrimSpace(text) != "" {
			if ferr := finish(live, text+"\n\n"+notice); ferr != nil {
				turnErr = ferr
			}
			break
		}
		_ = finish(live, "")
		tt := t
		tt.deliveryID = id()
		got, rerr := m.reply(ctx, tt, notice, transcript.SourceNotice)
		ids = append(ids, got...)
		if rerr != nil {
			m.d.Log.Error().Err(rerr).Str("session", t.key).Msg("turn reply not delivered")
			turnErr = rerr
		}
	default:
		if ferr := finish(live, m.withFooter(t, text)); ferr != nil {
			turnErr = ferr
		}
	}
	if t.done != nil {
		t.done(ids, turnErr)
	}
	return nil
}
