package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/sessionkey"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/internal/redact"
	"github.com/agentbot/agentbot/model"
)

func obj(props map[string]any, required ...string) map[string]any {
	return map[string]any{"type": "object", "properties": props, "required": required}
}

var str = map[string]any{"type": "string"}

// builtinTool names the bot's own tools (everything else offered is the Toolbox's).
var builtinTool = map[string]bool{"send_message": true, "spawn_subagent": true, "schedule_job": true, "list_jobs": true, "cancel_job": true}

// readOnlyTool are the bot's tools with no effect outside the turn.
var readOnlyTool = map[string]bool{"list_jobs": true}

// sideEffects reports whether any of calls runs an offered tool that may
// act outside the turn (posts, schedules, spawns; every MCP tool counts).
// A turn past such a call is not run again after an edit (invariant 20).
func sideEffects(calls []model.ToolCall, offered []model.Tool) bool {
	return slices.ContainsFunc(calls, func(c model.ToolCall) bool {
		return !readOnlyTool[c.Name] && slices.ContainsFunc(offered, func(tl model.Tool) bool { return tl.Name == c.Name })
	})
}

// tools are offered to main sessions only; subagents get none.
func (m *Manager) tools(key string) []model.Tool {
	if sessionkey.KindOf(key) != KindMain {
		return nil
	}
	ts := []model.Tool{
		{Name: "send_message", Description: "Send a message to a Discord conversation: to is channel:<id> or user:<id>.", Parameters: obj(map[string]any{"to": str, "text": str}, "to", "text")},
		{Name: "spawn_subagent", Description: "Start a subagent on a task; it reports back when done.", Parameters: obj(map[string]any{"task": str, "label": str, "thread": map[string]any{"type": "boolean"}}, "task")},
	}
	if m.d.Jobs != nil {
		ts = append(ts,
			model.Tool{Name: "schedule_job", Description: "Schedule a job: schedule is a 5-field cron expression, 'every 10m' or 'at <RFC 3339>'; target main|isolated|current|session:<key>.", Parameters: obj(map[string]any{"schedule": str, "prompt": str, "target": str, "to": str}, "schedule", "prompt")},
			model.Tool{Name: "list_jobs", Description: "List scheduled jobs.", Parameters: obj(map[string]any{})},
			model.Tool{Name: "cancel_job", Description: "Cancel a scheduled job by id.", Parameters: obj(map[string]any{"id": str}, "id")},
		)
	}
	return ts
}

// runTool executes one tool call and returns its result text for the
// model. Errors become result text: the model decides what to tell the user.
func (m *Manager) runTool(ctx context.Context, t turnInput, offered []model.Tool, call model.ToolCall) string {
	var out string
	err := fmt.Errorf("tool %q is not available here", call.Name)
	if slices.ContainsFunc(offered, func(tl model.Tool) bool { return tl.Name == call.Name }) {
		// Only offered tools run: a model may name any tool, and subagents
		// get none of the bot's own.
		if builtinTool[call.Name] {
			out, err = m.tool(ctx, t, call)
		} else if m.d.Toolbox != nil {
			out, err = m.d.Toolbox.Call(ctx, m.agentFor(t.key).ID, t.actor(), call)
		}
	}
	if authz.IsRefusal(err) {
		// A refusal is the tool's answer: the model tells the user why.
		m.d.Log.Info().Str("tool", call.Name).Str("session", t.key).Str("user", t.requester).Str("reason", err.Error()).Msg("tool call refused")
		return "refused: " + err.Error()
	}
	if err != nil {
		m.d.Log.Warn().Err(err).Str("tool", call.Name).Str("session", t.key).Msg("tool call failed")
		return "error: " + redact.String(err.Error()) // the model, the transcript and the console see it
	}
	return out
}

func (m *Manager) tool(ctx context.Context, t turnInput, call model.ToolCall) (string, error) {
	var args struct {
		To, Text, Task, Label, Schedule, Prompt, Target, ID string
		Thread                                              *bool
	}
	if strings.TrimSpace(call.Arguments) != "" {
		if err := json.Unmarshal([]byte(call.Arguments), &args); err != nil {
			return "", fmt.Errorf("bad arguments for %s: %w", call.Name, err)
		}
	}
	switch call.Name {
	case "send_message":
		return m.sendMessage(ctx, t, args.To, args.Text, call.ID)
	case "spawn_subagent":
		// A subagent is more model work than the turn that spawned it: it
		// takes a turn of the spawner's budget (invariant 20).
		if m.d.Budget != nil {
			if d := m.d.Budget.Take(t.requester, ""); !d.OK {
				return "", &authz.Refusal{Msg: "the requesting user's turn budget is used up; no subagent was started"}
			}
		}
		// The subagent's usage budget check sees this turn's calls so far.
		m.flushUsage(ctx, t)
		res, err := m.Spawn(ctx, SpawnRequest{Task: args.Task, Label: args.Label, Thread: args.Thread, Requester: t.conv, RequestedBy: t.requester, ParentKey: t.key})
		if err != nil {
			return "", err
		}
		return res.Summary(), nil
	case "schedule_job":
		if m.d.Jobs == nil {
			return "", errors.New("the scheduler is disabled")
		}
		return m.d.Jobs.ScheduleJob(ctx, t.actor(), JobRequest{Schedule: args.Schedule, Prompt: args.Prompt, Target: args.Target, To: args.To, AgentID: sessionkey.Agent(t.key), CreatedBy: t.requester, CreatedIn: t.conv})
	case "list_jobs":
		if m.d.Jobs == nil {
			return "", errors.New("the scheduler is disabled")
		}
		return m.d.Jobs.ListJobs(ctx, t.actor())
	case "cancel_job":
		if m.d.Jobs == nil {
			return "", errors.New("the scheduler is disabled")
		}
		return m.d.Jobs.CancelJob(ctx, t.actor(), args.ID)
	}
	return "", fmt.Errorf("unknown tool %q", call.Name)
}

// ParseTarget turns "channel:<id>" or "user:<id>" (on the manager's
// platform), or a Matrix target (sessionkey.ParseMatrixTarget:
// "matrix:!room:server", "matrix:!room:server/$event" for a thread,
// "matrix:@user:server" for a DM) into a conversation ref.
func (m *Manager) ParseTarget(to string) (binding.ConversationRef, error) {
	to = strings.TrimSpace(to)
	if ref, ok, err := sessionkey.ParseMatrixTarget(to); ok {
		if err != nil {
			return binding.ConversationRef{}, err
		}
		if ref.Channel == m.ConversationRef("", "").Channel {
			ref.AccountID = m.opt.AccountID
		}
		return ref.Normalize(), nil
	}
	if id, ok := strings.CutPrefix(to, "channel:"); ok && id != "" {
		return m.ConversationRef(id, ""), nil
	}
	if id, ok := strings.CutPrefix(to, "user:"); ok && id != "" {
		return m.ConversationRef(sessionkey.DMPrefix+id, ""), nil
	}
	return binding.ConversationRef{}, fmt.Errorf("target %q: write channel:<id> or user:<id>", to)
}

// sendMessage delivers a message-tool send. To the turn's own conversation
// it is part of the turn (the turn writes it, once); elsewhere Outbound
// writes it into the destination's transcript.
func (m *Manager) sendMessage(ctx context.Context, t turnInput, to, text, callID string) (string, error) {
	target, err := m.ParseTarget(to)
	if err != nil {
		return "", err
	}
	if strings.TrimSpace(text) == "" {
		return "", errors.New("text is empty")
	}
	// Invariant 13: only where the user the turn acts for can view and
	// send (and the bot can post), whether or not it is this conversation.
	if m.d.Authority == nil {
		if target.Key() != t.conv.Key() {
			return "", &authz.Refusal{Msg: "sending to other conversations is not enabled here"}
		}
	} else if err := m.d.Authority.CanPost(ctx, t.requester, target); err != nil {
		return "", err
	}
	agent := m.agentFor(t.key)
	d := delivery.Delivery{ID: t.deliveryID + ":tool:" + callID, Target: target, Text: text,
		Producer: delivery.Producer{Source: transcript.SourceMessageTool, AgentID: agent.ID}}
	var commit delivery.CommitFunc
	if target.Key() == t.conv.Key() {
		d.Producer.TurnSessionKey = t.key
		commit = func(ctx context.Context, r delivery.Receipt) error {
			_, err := m.d.Transcripts.Append(ctx, t.key, transcript.Entry{Role: transcript.RoleAssistant, Author: agent.Name, Text: r.Text,
				MessageIDs: r.MessageIDs, Source: transcript.SourceMessageTool, DeliveryID: d.ID, Meta: r.EntryMeta(nil)})
			return err
		}
	}
	res, err := m.d.Outbound.Deliver(ctx, d, commit)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("sent (message %s)", strings.Join(res.MessageIDs, ",")), nil
}
