package notes

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/model"
)

// Tool names.
const (
	ToolRemember = "remember"
	ToolForget   = "forget"
)

// Toolbox is what Tools puts itself in front of (session.Toolbox's
// method set).
type Toolbox interface {
	Tools(ctx context.Context, agentID string, actor authz.Actor) []model.Tool
	Call(ctx context.Context, agentID string, actor authz.Actor, call model.ToolCall) (string, error)
}

// Tools offers remember and forget while notes are on, in front of Next
// (nil: no other tools).
type Tools struct {
	Notes *Service
	Next  Toolbox
}

var (
	rememberTool = model.Tool{
		Name: ToolRemember,
		Description: "Remember a short note. It is posted as a visible message in this chat (\"📝 Noted (scope): text\"), and given to you at the start of later turns: " +
			"scope me = in turns the user you act for starts, anywhere; here = in this conversation; server = in every conversation of this server (operators only). Deleting the message forgets it.",
		Parameters: map[string]any{"type": "object", "required": []string{"text", "scope"}, "properties": map[string]any{
			"text":  map[string]any{"type": "string", "description": "what to remember, short (at most 500 characters)"},
			"scope": map[string]any{"type": "string", "enum": []string{string(ScopeMe), string(ScopeHere), string(ScopeServer)}},
		}},
	}
	forgetTool = model.Tool{
		Name:        ToolForget,
		Description: "Forget a note by its id: its message is deleted. Only its author, the user it is about or an operator of its server may.",
		Parameters: map[string]any{"type": "object", "required": []string{"id"}, "properties": map[string]any{
			"id": map[string]any{"type": "string", "description": "the note's id, as shown in its message and in your notes"},
		}},
	}
)

// Tools lists the tools offered to a turn.
func (t Tools) Tools(ctx context.Context, agentID string, actor authz.Actor) []model.Tool {
	var out []model.Tool
	if t.Notes.On() {
		out = append(out, rememberTool, forgetTool)
	}
	if t.Next != nil {
		out = append(out, t.Next.Tools(ctx, agentID, actor)...)
	}
	return out
}

// Call runs a tool call; a call of a withdrawn tool is refused.
func (t Tools) Call(ctx context.Context, agentID string, actor authz.Actor, call model.ToolCall) (string, error) {
	switch call.Name {
	case ToolRemember:
		var args struct{ Text, Scope string }
		if err := json.Unmarshal([]byte(call.Arguments), &args); err != nil {
			return "", fmt.Errorf("bad arguments for remember (want {\"text\": \"...\", \"scope\": \"me|here|server\"}): %w", err)
		}
		if !t.Notes.On() {
			return "", ErrOff
		}
		scope, err := ParseScope(args.Scope)
		if err != nil {
			return "", &authz.Refusal{Msg: err.Error()}
		}
		n, err := t.Notes.Remember(ctx, actor, agentID, args.Text, scope)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("noted: note %s (%s) is displayed in this chat as message %s", n.ID, n.Scope, n.MessageIDs[0]), nil
	case ToolForget:
		var args struct{ ID string }
		if err := json.Unmarshal([]byte(call.Arguments), &args); err != nil {
			return "", fmt.Errorf("bad arguments for forget (want {\"id\": \"...\"}): %w", err)
		}
		n, err := t.Notes.Forget(ctx, actor, args.ID)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("forgot note %s: its message was deleted", n.ID), nil
	}
	if t.Next == nil {
		return "", fmt.Errorf("tool %q is not available here", call.Name)
	}
	return t.Next.Call(ctx, agentID, actor, call)
}
