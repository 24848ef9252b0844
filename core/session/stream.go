package session

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/core/usertext"
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
	run, _ := m.Running(t.key)
	s := &stream{m: m, ctx: ctx, mctx: mctx, cancel: cancel, unwatch: unwatch, watching: true, lo: lo, agent: agent, t: t, run: run, stopTyping: stopTyping}
	s.live = s.open()
	req := model.Request{System: m.systemPrompt(agent, t.key) + m.notesFor(ctx, t), Messages: m.toMessages(ctx, t, history)}
	if agent.MaxToolSteps > 0 {
		req.Tools = append(turnTools(m.tools(t.key), t), m.toolboxTools(ctx, agent, t)...)
	}
	text, err := s.rounds(sp, req)
	return s.conclude(end, text, err)
}

// stream is one streamed turn (streamTurn): its live messages, one per
// model round that showed text, and the watch of its message.
type stream struct {
	m          *Manager
	ctx        context.Context // the turn's: sends and their entries
	mctx       context.Context // the model's: ends on /stop or a change of the message
	cancel     context.CancelCauseFunc
	unwatch    func(proceed bool) error
	watching   bool
	changed    error // the message changed before anything was shown
	lo         LiveOutbound
	agent      Agent
	t          turnInput
	run        Run
	stopTyping func()
	n          int            // rounds whose text was shown so far
	ids        []string       // message ids displayed
	live       *delivery.Live // the current round's
}

// show ends the watch before the first text is displayed; false: the
// message changed first, and nothing may be shown.
func (s *stream) show() bool {
	if s.watching {
		s.watching = false
		if s.changed = s.unwatch(true); s.changed != nil {
			s.cancel(s.changed)
		}
	}
	return s.changed == nil
}

// id is the delivery id of the current round's live message.
func (s *stream) id() string { return roundID(s.t.deliveryID, s.n) }

// open starts the current round's live message.
func (s *stream) open() *delivery.Live {
	d := delivery.Delivery{ID: s.id(), Target: s.t.conv, ReplyTo: s.t.replyTo, BindingID: s.t.bindingID,
		Producer: delivery.Producer{Source: transcript.SourceTurn, TurnSessionKey: s.t.key, AgentID: s.agent.ID}}
	if s.n > 0 {
		d.ReplyTo = ""
	}
	return s.lo.Live(s.ctx, d, delivery.LiveOptions{
		Controls: delivery.Controls{StopRun: strconv.FormatUint(s.run.ID, 10)},
		Commit:   s.m.commitReply(s.t.key, s.agent.Name, transcript.SourceTurn, d.ID, s.t.tally),
		After:    s.m.opt.LiveAfter,
	})
}

func (s *stream) noteFinished(res delivery.Result, err error) error {
	s.ids = append(s.ids, res.MessageIDs...)
	if err != nil {
		s.m.d.Log.Error().Err(err).Str("session", s.t.key).Msg("streamed reply not delivered")
	}
	return err
}

func (s *stream) finish(l *delivery.Live, text string) error {
	return s.noteFinished(l.Finish(s.ctx, text))
}

// rounds streams the model's rounds, running their tool calls, until one
// ends without any (or the steps run out, the model fails, the message
// changes or the turn is stopped); it returns the last round's text.
func (s *stream) rounds(sp model.Streamer, req model.Request) (string, error) {
	for step := 0; ; step++ {
		var acc strings.Builder
		onText := func(delta string) {
			if acc.Len() == 0 && strings.TrimSpace(delta) != "" {
				if !s.show() {
					return
				}
				s.stopTyping() // the reply ends the indicator
			}
			if s.changed != nil {
				return
			}
			acc.WriteString(delta)
			s.live.Update(acc.String())
		}
		resp, err := sp.Stream(s.mctx, req, onText)
		if err != nil {
			return acc.String(), err
		}
		s.t.tally.add(resp)
		s.m.used(s.ctx, s.agent, s.t, resp)
		if len(resp.ToolCalls) == 0 || step >= s.agent.MaxToolSteps {
			if len(resp.ToolCalls) > 0 && strings.TrimSpace(resp.Text) == "" {
				return resp.Text, fmt.Errorf("%w (%d)", errToolSteps, s.agent.MaxToolSteps)
			}
			return resp.Text, nil
		}
		if strings.TrimSpace(resp.Text) != "" {
			if !s.show() {
				return "", nil
			}
			// A complete round's text stays shown, as its own message;
			// the turn's record says first that its last delivery is the
			// next round's (turnstate.go).
			s.m.markRounds(s.ctx, s.t.key, s.t.deliveryID, s.n+1)
			_ = s.finish(s.live, resp.Text)
			s.n++
			s.live = s.open()
		}
		if sideEffects(resp.ToolCalls, req.Tools) && !s.show() {
			// The message changed before a tool with effects ran: the
			// attempt ends here (once past this, it stands: an edit no
			// longer runs it again, so no effect happens twice).
			return "", nil
		}
		req.Messages = append(req.Messages, model.Message{Role: model.RoleAssistant, Text: resp.Text, ToolCalls: resp.ToolCalls})
		for _, call := range resp.ToolCalls {
			out := s.m.runTool(s.mctx, s.t, req.Tools, call)
			req.Messages = append(req.Messages, model.Message{Role: model.RoleTool, Text: out, ToolCallID: call.ID, Name: call.Name})
		}
	}
}

// conclude ends the turn after its rounds: a change of the message before
// anything was shown is returned (errDeleted, errEdited); else the last
// live message is finished as stopped, failed (with a notice) or answered,
// and the turn is done.
func (s *stream) conclude(end func(), text string, err error) error {
	m, t := s.m, s.t
	wasStopped := stopped(s.mctx)
	if s.watching {
		// Nothing was displayed: the watch ends as a non-streamed turn's.
		s.watching = false
		s.changed = s.unwatch(!wasStopped)
	}
	if s.changed != nil {
		end()
		_ = s.finish(s.live, "") // nothing of this attempt was displayed
		return s.changed
	}
	end()
	s.stopTyping()
	var turnErr error
	switch {
	case wasStopped:
		// What was displayed stays, and is what the entry records.
		m.d.Log.Info().Str("session", t.key).Msg("turn stopped")
		_ = s.noteFinished(s.live.FinishShown(s.ctx))
		turnErr = ErrStopped
	case err != nil:
		m.d.Log.Error().Err(err).Str("session", t.key).Msg("turn failed")
		turnErr = fmt.Errorf("%w: %w", ErrTurnFailed, err)
		notice, _ := usertext.ForChat(forPeople(err))
		if strings.TrimSpace(text) != "" {
			if ferr := s.finish(s.live, text+"\n\n"+notice); ferr != nil {
				turnErr = ferr
			}
			break
		}
		_ = s.finish(s.live, "")
		tt := t
		tt.deliveryID = s.id()
		got, rerr := m.reply(s.ctx, tt, notice, transcript.SourceNotice)
		s.ids = append(s.ids, got...)
		if rerr != nil {
			m.d.Log.Error().Err(rerr).Str("session", t.key).Msg("turn reply not delivered")
			turnErr = rerr
		}
	default:
		if ferr := s.finish(s.live, m.withFooter(t, text)); ferr != nil {
			turnErr = ferr
		}
	}
	if t.done != nil {
		t.done(s.ids, turnErr)
	}
	return nil
}
