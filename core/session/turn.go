package session

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/sessionkey"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/core/usertext"
	"github.com/agentbot/agentbot/model"
)

// turnInput is one queued turn.
type turnInput struct {
	key         string
	conv        binding.ConversationRef
	bindingID   string
	replyTo     string // message the bot's reply references
	userReplyTo string // message the user's message replied to
	deliveryID  string
	triggerSeq  uint64
	requester   string
	// trigger is the user message that started the turn ("" for a job
	// turn): deleting it cancels the turn, editing it runs it again.
	trigger string
	// inChatJob marks an in-chat job's turn (Rule 2: it delivers only into
	// its own chat, so it is offered no tool that posts elsewhere).
	inChatJob bool
	// done, if set, receives the reply's message ids (or the error).
	done func(ids []string, err error)
	// tally counts the turn's model calls for its reply entries.
	tally *tally
}

// actor is who the turn's tools act for: the requester, in the turn's conversation.
func (t turnInput) actor() authz.Actor { return authz.Actor{UserID: t.requester, Where: t.conv} }

// persona returns how a session speaks in a conversation: bound subagent
// sessions post under their own webhook persona, everything else as the bot.
func (m *Manager) persona(key string, bound bool) (delivery.Persona, bool) {
	if !bound || sessionkey.KindOf(key) != KindSubagent {
		return delivery.Persona{}, false
	}
	a := m.agentFor(key)
	label := a.Name
	if in, ok := m.Info(key); ok && in.Label != "" {
		label = in.Label
	}
	return delivery.Persona{Name: truncateRunes("🤖 "+label, 80), AvatarURL: a.AvatarURL}, true
}

// runTurn runs one turn: the model on the history up to the turn's message,
// then its reply. It reports whether the turn ended before its model call
// returned unchanged (stopped, its message deleted): a trigger's "waiting".
func (m *Manager) runTurn(ctx context.Context, t turnInput) (waiting bool) {
	waiting = true
	if m.opt.OnTurn != nil {
		start := m.d.Clock.Now()
		defer func() { m.opt.OnTurn(m.d.Clock.Now().Sub(start)) }()
	}
	agent := m.agentFor(t.key)
	t.tally = &tally{}
	defer m.flushUsage(ctx, t) // records no entry of the turn carried
	if notice, refused := m.budget(ctx, t); refused {
		m.refuseOverBudget(ctx, t, notice)
		return false
	}
	var text string
	var err error
	stopTyping := m.startTyping(t.conv)
	defer stopTyping()
	for {
		// A change of the turn's message after this point is seen by the
		// watch below; one before it is in the history read here.
		deleted, edits := m.triggerState(t.trigger)
		if deleted {
			m.d.Log.Info().Str("session", t.key).Msg("turn dropped: its message was deleted")
			if t.done != nil {
				t.done(nil, errDeleted)
			}
			return true
		}
		var history []transcript.Entry
		history, err = m.d.Transcripts.History(ctx, t.key, max(agent.MaxHistory, 1))
		history = upTo(history, t.triggerSeq)
		if err != nil {
			break
		}
		mctx, end := m.startRun(ctx, t.key, t.requester)
		wctx, unwatch := m.watchTrigger(mctx, t.trigger, edits)
		var changed error
		wasStopped := false
		if lo, sp, ok := m.streaming(agent, t); ok {
			// A streamed reply stands from its first displayed text on; a
			// change of the message before that is handled as below.
			if changed = m.streamTurn(ctx, wctx, end, unwatch, lo, sp, agent, t, history, stopTyping); changed == nil {
				return false
			}
		} else {
			// The first side-effecting tool call ends the watch (stand):
			// from then on the attempt is not cancelled and run again by
			// an edit, so its effects never happen twice.
			stood, standErr := false, error(nil)
			stand := func() error {
				if !stood {
					stood, standErr = true, unwatch(true)
				}
				return standErr
			}
			text, err = m.complete(wctx, agent, t, history, stand)
			wasStopped = stopped(wctx)
			if stood {
				changed = standErr
				if changed == nil {
					waiting = false // the turn stands; a change now is one of an answered message
				}
			} else {
				changed = unwatch(!wasStopped)
			}
		}
		end()
		switch {
		case errors.Is(changed, errDeleted):
			// Deleted mid-turn: nothing is posted; the user's entry is
			// already deleted (its own record).
			stopTyping()
			if t.done != nil {
				t.done(nil, errDeleted)
			}
			return true
		case wasStopped:
			// /stop: nothing of the answer was displayed, so nothing is
			// posted; the user's entry stays (it was displayed).
			stopTyping()
			m.d.Log.Info().Str("session", t.key).Msg("turn stopped")
			if t.done != nil {
				t.done(nil, ErrStopped)
			}
			return waiting
		case errors.Is(changed, errEdited):
			continue // the model runs again on the new text
		}
		waiting = false // the reply (or a notice) is sent now; it stands
		break
	}
	stopTyping() // the reply ends the indicator; no renewal may follow it
	m.answer(ctx, t, text, err)
	return waiting
}

// answer posts a turn's reply text, or a notice for the model's error err,
// and reports the turn done.
func (m *Manager) answer(ctx context.Context, t turnInput, text string, err error) {
	source := transcript.SourceTurn
	var turnErr error
	if err != nil {
		m.d.Log.Error().Err(err).Str("session", t.key).Msg("turn failed")
		text, _ = usertext.ForChat(forPeople(err))
		source = transcript.SourceNotice
		turnErr = fmt.Errorf("%w: %w", ErrTurnFailed, err)
	} else {
		text = m.withFooter(t, text)
	}
	if strings.TrimSpace(text) == "" {
		if t.done != nil {
			t.done(nil, nil)
		}
		return
	}
	ids, err := m.replyWaitingForStore(ctx, t, text, source)
	if err != nil {
		m.d.Log.Error().Err(err).Str("session", t.key).Msg("turn reply not delivered")
	} else {
		err = turnErr // the notice was displayed; the turn still failed
	}
	if t.done != nil {
		t.done(ids, err)
	}
}

// upTo drops entries written after the turn's own message (a message
// queued behind this turn gets its own turn), so each turn answers the
// conversation as it stood when its message arrived.
func upTo(history []transcript.Entry, seq uint64) []transcript.Entry {
	if seq == 0 {
		return history
	}
	for i, e := range history {
		if e.Seq > seq {
			return history[:i]
		}
	}
	return history
}

// reply posts text as this turn's reply; the turn writes the entry itself
// under the conversation lock once Discord confirmed it.
func (m *Manager) reply(ctx context.Context, t turnInput, text string, source transcript.Source) ([]string, error) {
	persona, webhook := m.persona(t.key, t.bindingID != "")
	agent := m.agentFor(t.key)
	d := delivery.Delivery{
		ID: t.deliveryID, Target: t.conv, Text: text, Persona: persona, ViaWebhook: webhook,
		ReplyTo: t.replyTo, BindingID: t.bindingID,
		Producer: delivery.Producer{Source: source, TurnSessionKey: t.key, AgentID: agent.ID},
	}
	author := persona.Name
	if author == "" {
		author = agent.Name
	}
	res, err := m.d.Outbound.Deliver(ctx, d, m.commitReply(t.key, author, source, d.ID, t.tally))
	if err != nil {
		return nil, err
	}
	return res.MessageIDs, nil
}

// commitReply writes a turn's reply entry once Discord confirmed it,
// under the conversation lock (delivery.CommitFunc). A model's answer
// (source turn) carries the model and tokens tl counted.
func (m *Manager) commitReply(key, author string, source transcript.Source, deliveryID string, tl *tally) delivery.CommitFunc {
	return func(ctx context.Context, r delivery.Receipt) error {
		e := transcript.Entry{
			Role: transcript.RoleAssistant, Author: author, Text: r.Text, MessageIDs: r.MessageIDs,
			Source: source, DeliveryID: deliveryID, Meta: r.EntryMeta(nil),
		}
		if source != transcript.SourceTurn {
			_, err := m.d.Transcripts.Append(ctx, key, e)
			return err
		}
		tl.stamp(&e)
		return m.appendWithCalls(ctx, key, e, tl)
	}
}

// complete runs the model with tools until it answers with text.
// stand, called before the first tool call with side effects, ends the
// watch of the turn's message; an error (the message changed first) ends
// the attempt before the tool runs.
func (m *Manager) complete(ctx context.Context, agent Agent, t turnInput, history []transcript.Entry, stand func() error) (string, error) {
	req := model.Request{System: m.systemPrompt(agent, t.key) + m.notesFor(ctx, t), Messages: m.toMessages(ctx, t, history)}
	if agent.MaxToolSteps > 0 {
		req.Tools = append(turnTools(m.tools(t.key), t), m.toolboxTools(ctx, agent, t)...)
	}
	return m.toolLoop(ctx, agent, t, req, stand)
}

// notesFor is the notes section of a turn's system prompt: the notes in
// scope of the user the turn acts for, read as the turn starts its model
// call.
func (m *Manager) notesFor(ctx context.Context, t turnInput) string {
	if m.d.Notes == nil || t.requester == "" {
		return ""
	}
	return m.d.Notes.Prompt(ctx, t.requester, t.conv)
}

// toolboxTools are the agent's MCP tools the turn's user may use.
func (m *Manager) toolboxTools(ctx context.Context, agent Agent, t turnInput) []model.Tool {
	if m.d.Toolbox == nil {
		return nil
	}
	return m.d.Toolbox.Tools(ctx, agent.ID, t.actor())
}

// toolLoop runs the model with req.Tools until it answers with text.
// stand (nil: none) is called before tool calls with side effects run.
func (m *Manager) toolLoop(ctx context.Context, agent Agent, t turnInput, req model.Request, stand func() error) (string, error) {
	for step := 0; ; step++ {
		resp, err := agent.Provider.Complete(ctx, req)
		if err != nil {
			return "", err
		}
		t.tally.add(resp)
		m.used(ctx, agent, t, resp)
		if len(resp.ToolCalls) == 0 {
			return resp.Text, nil
		}
		if step >= agent.MaxToolSteps {
			if strings.TrimSpace(resp.Text) == "" {
				// Silence would leave the user without an answer: say why.
				return "", fmt.Errorf("%w (%d)", errToolSteps, agent.MaxToolSteps)
			}
			return resp.Text, nil
		}
		if stand != nil && sideEffects(resp.ToolCalls, req.Tools) {
			if err := stand(); err != nil {
				return "", err
			}
		}
		req.Messages = append(req.Messages, model.Message{Role: model.RoleAssistant, Text: resp.Text, ToolCalls: resp.ToolCalls})
		for _, call := range resp.ToolCalls {
			out := m.runTool(ctx, t, req.Tools, call)
			req.Messages = append(req.Messages, model.Message{Role: model.RoleTool, Text: out, ToolCallID: call.ID, Name: call.Name})
		}
	}
}

func (m *Manager) systemPrompt(agent Agent, key string) string {
	prompt := agent.SystemPrompt
	if in, ok := m.Info(key); ok && in.Kind == KindSubagent && in.Task != "" {
		prompt += "\nYou are a subagent working on one task.\nTask: " + in.Task
	}
	return prompt
}

// errToolSteps: the model was still calling tools when the turn's tool
// steps ran out, and gave no text.
var errToolSteps error = turnFailure{log: "tool step limit reached without an answer",
	user: "The model kept calling tools without answering; the turn was stopped."}

// turnFailure is a turn's own failure, worded for the log and for people
// (usertext.UserFacing).
type turnFailure struct{ log, user string }

func (f turnFailure) Error() string       { return f.log }
func (f turnFailure) UserMessage() string { return f.user }

// forPeople is a failed turn's or run's err ready for the chat boundary
// (core/usertext): when nothing in it is worded for people, it reads as
// the model's error of its kind (model.Classified), as a turn fails in its
// model call.
func forPeople(err error) error {
	var uf usertext.UserFacing
	if errors.As(err, &uf) {
		return err
	}
	return model.Classified(err)
}

// toMessages turns the stored transcript into model messages. Entries stay
// as stored; only the request gains provenance notes, so the model knows
// which job or subagent posted a message and what a reply refers to.
func (m *Manager) toMessages(ctx context.Context, t turnInput, history []transcript.Entry) []model.Message {
	out := make([]model.Message, 0, len(history))
	agent := m.agentFor(t.key)
	// Attachments count against one byte budget per request, the newest
	// messages' first (invariant 20).
	left := m.opt.RequestAttachmentBytes
	withFiles := map[int]model.Message{}
	for i := len(history) - 1; i >= 0; i-- {
		if e := history[i]; e.Role == transcript.RoleUser && len(e.Attachments) > 0 {
			withFiles[i] = m.withAttachments(ctx, agent, model.Message{}, e.Attachments, &left)
		}
	}
	for i, e := range history {
		msg := model.Message{Role: model.RoleUser, Text: e.Text, Name: e.Author}
		if e.Role == transcript.RoleAssistant {
			msg.Role = model.RoleAssistant
		} else if m.opt.ModelText != nil {
			msg.Text = m.opt.ModelText(msg.Text)
		}
		if files, ok := withFiles[i]; ok {
			msg.Text, msg.Images = model.JoinText(msg.Text, files.Text), files.Images
		}
		if note := provenance(e); note != "" {
			msg.Text = note + "\n" + msg.Text
		}
		if e.Seq == t.triggerSeq && t.userReplyTo != "" {
			if ref, ok, err := m.d.Transcripts.ByMessageID(ctx, t.key, t.userReplyTo); err == nil && ok {
				msg.Text = fmt.Sprintf("[in reply to message %s %s: %q]\n%s", t.userReplyTo, describe(ref), excerpt(ref.Text, 200), msg.Text)
			}
		}
		out = append(out, msg)
	}
	return out
}

// provenance is the note a non-turn entry carries in the model request.
func provenance(e transcript.Entry) string {
	switch e.Source {
	case transcript.SourceJob, transcript.SourceJobTrigger, transcript.SourceAlert, transcript.SourceAnnounce,
		transcript.SourceMessageTool, transcript.SourceIntro, transcript.SourceFarewell, transcript.SourceNotice, transcript.SourceNote:
		return "[" + describe(e) + "]"
	}
	return ""
}

// describe says who posted an entry, for the model.
func describe(e transcript.Entry) string {
	switch e.Source {
	case transcript.SourceJob, transcript.SourceJobTrigger:
		return fmt.Sprintf("posted by scheduled job %s %q (schedule %s)", e.Meta["jobId"], e.Meta["jobName"], e.Meta["schedule"])
	case transcript.SourceAlert:
		return fmt.Sprintf("failure alert for job %s %q", e.Meta["jobId"], e.Meta["jobName"])
	case transcript.SourceAnnounce:
		return fmt.Sprintf("result of subagent %s (%s)", e.Meta["label"], e.Meta["subagent"])
	case transcript.SourceMessageTool:
		return "sent by the send_message tool"
	case transcript.SourceNote:
		return "a note posted by the remember tool"
	case transcript.SourceUser:
		return "from user " + e.Author
	case transcript.SourceTurn:
		return "your reply"
	default:
		return string(e.Source) + " message"
	}
}

func excerpt(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

func truncateRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n])
}

func sortInfos(in []Info) {
	slices.SortFunc(in, func(a, b Info) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
}
