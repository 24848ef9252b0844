package session

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/model"
)

// JobTurn is an in-chat job run: a turn in the chat's session.
type JobTurn struct {
	Conversation binding.ConversationRef
	DeliveryID   string            // unique per run: sessionkey.JobRunDelivery
	Trigger      string            // "⏰ <job name>: <prompt>"
	Meta         map[string]string // jobId, jobName, schedule
	// CreatedBy is the job's creator: the turn's tools act with their
	// authority ("" = nobody's: every authority-requiring call is refused).
	CreatedBy string
}

// RunJobTurn posts the visible trigger line and runs a turn in the chat's
// session, serialised with user turns (Rule 2, in-chat mode). Both the
// trigger and the reply are displayed, so the turn writes both. It returns
// the session the turn ran in (the one the chat routes to now: a bound
// chat's bound session) and the message ids of the trigger and the reply;
// a failed model call displays a notice and returns ErrTurnFailed with
// those ids.
func (m *Manager) RunJobTurn(ctx context.Context, jt JobTurn) (key string, ids []string, err error) {
	conv := jt.Conversation.Normalize()
	key, rec, bound := m.d.Outbound.SessionFor(conv)
	ids, err = m.jobTurn(ctx, key, rec, bound, conv, jt)
	return key, ids, err
}

// jobTurn runs in-chat job turn jt in session key, the session conv routes to.
func (m *Manager) jobTurn(ctx context.Context, key string, rec binding.Record, bound bool, conv binding.ConversationRef, jt JobTurn) ([]string, error) {
	type result struct {
		ids []string
		err error
	}
	ch := make(chan result, 1)
	err := m.enqueue(key, func(qctx context.Context) {
		agent := m.agentFor(key)
		trig := delivery.Delivery{ID: jt.DeliveryID + ":trigger", Target: conv, Text: jt.Trigger,
			Producer: delivery.Producer{Source: transcript.SourceJobTrigger, TurnSessionKey: key, AgentID: agent.ID, Meta: jt.Meta}}
		var seq uint64
		tres, err := m.d.Outbound.Deliver(qctx, trig, func(ctx context.Context, r delivery.Receipt) error {
			e, err := m.d.Transcripts.Append(ctx, key, transcript.Entry{Role: transcript.RoleUser, Author: "scheduler", Text: r.Text,
				MessageIDs: r.MessageIDs, Source: transcript.SourceJobTrigger, DeliveryID: trig.ID, Meta: r.EntryMeta(maps.Clone(jt.Meta))})
			seq = e.Seq
			return err
		})
		if err != nil {
			ch <- result{err: fmt.Errorf("job trigger: %w", err)}
			return
		}
		t := turnInput{key: key, conv: conv, deliveryID: jt.DeliveryID, triggerSeq: seq, requester: jt.CreatedBy, inChatJob: true,
			done: func(ids []string, err error) { ch <- result{append(slices.Clone(tres.MessageIDs), ids...), err} }}
		if bound {
			t.bindingID = rec.ID
		}
		m.runTurn(qctx, t)
	})
	if err != nil {
		return nil, fmt.Errorf("job turn: %w", err)
	}
	select {
	case r := <-ch:
		return r.ids, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// BackgroundRun is a background job run for RunBackground.
type BackgroundRun struct {
	AgentID, Key, Prompt string
	Seed                 []transcript.Entry
	// CreatedBy (the job's creator) and Conversation (where its result
	// goes) are whose usage budget the run spends; Run names it in usage.
	CreatedBy    string
	Conversation binding.ConversationRef
	Run          string
}

// RunBackground runs a background job's prompt in its own session key
// (seeded with a snapshot for "current" jobs) and returns the result text.
// Nothing is written to any chat transcript: the run's entries stay in its
// own session, and the caller delivers the result through Outbound.
func (m *Manager) RunBackground(ctx context.Context, in BackgroundRun) (string, error) {
	agentID, key, prompt, seed := in.AgentID, in.Key, in.Prompt, in.Seed
	agent, ok := m.agents[agentID]
	if !ok {
		agent = m.DefaultAgent()
	}
	t := turnInput{key: key, conv: in.Conversation, requester: in.CreatedBy, deliveryID: in.Run}
	if _, refused := m.budget(ctx, t); refused {
		return "", fmt.Errorf("background run %s: %w", key, ErrOverBudget)
	}
	if _, err := m.d.Transcripts.Append(ctx, key, transcript.Entry{Role: transcript.RoleUser, Author: "scheduler", Text: prompt, Source: transcript.SourceJobTrigger, DeliveryID: "prompt"}); err != nil {
		return "", fmt.Errorf("background run %s: %w", key, err)
	}
	msgs := make([]model.Message, 0, len(seed)+1)
	msgs = append(msgs, m.toMessages(ctx, turnInput{key: key}, seed)...)
	msgs = append(msgs, model.Message{Role: model.RoleUser, Text: prompt})
	resp, err := agent.Provider.Complete(ctx, model.Request{System: agent.SystemPrompt, Messages: msgs})
	if err != nil {
		return "", fmt.Errorf("background run %s: %w", key, err)
	}
	t.tally = &tally{}
	defer m.flushUsage(ctx, t) // when the result's entry did not carry the record
	t.tally.add(resp)
	m.used(ctx, agent, t, resp)
	e := transcript.Entry{Role: transcript.RoleAssistant, Author: agent.Name, Text: resp.Text, Source: transcript.SourceTurn, DeliveryID: "result"}
	t.tally.stamp(&e)
	if err := m.appendWithCalls(ctx, key, e, t.tally); err != nil {
		return "", fmt.Errorf("background run %s: %w", key, err)
	}
	return resp.Text, nil
}

// Snapshot returns the recent history of the session a conversation
// routes to (for "current" jobs, taken at creation).
func (m *Manager) Snapshot(ctx context.Context, conv binding.ConversationRef, n int) ([]transcript.Entry, error) {
	key, _, _ := m.d.Outbound.SessionFor(conv)
	return m.d.Transcripts.History(ctx, key, n)
}

// turnTools is what a turn is offered. An in-chat job's turn delivers only
// into its own chat (Rule 2): send_message, which posts into any chat, is
// not offered (and so refused by runTool if called); its reply is its
// output.
func turnTools(ts []model.Tool, t turnInput) []model.Tool {
	if !t.inChatJob {
		return ts
	}
	return slices.DeleteFunc(slices.Clone(ts), func(tl model.Tool) bool { return tl.Name == "send_message" })
}
