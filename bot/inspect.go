package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/internal/redact"
)

// ErrNotFound: the session or job asked for does not exist (exit 1).
var ErrNotFound = errors.New("not found")

// bindingJSON is the scripting contract of `bot inspect bindings -json`.
type bindingJSON struct {
	BindingID        string             `json:"bindingId"`
	TargetSessionKey string             `json:"targetSessionKey"`
	TargetKind       binding.TargetKind `json:"targetKind"`
	Conversation     conversationJSON   `json:"conversation"`
	Status           binding.Status     `json:"status"`
	BoundBy          string             `json:"boundBy,omitempty"`
	BoundAt          time.Time          `json:"boundAt"`
	ExpiresAt        *time.Time         `json:"expiresAt"`
	LastActivityAt   time.Time          `json:"lastActivityAt"`
	EndedAt          *time.Time         `json:"endedAt"`
	EndedReason      string             `json:"endedReason"`
}

// conversationJSON is a binding's conversation in the scripting contract:
// every field is always present (binding.ConversationRef omits an empty
// parentConversationId).
type conversationJSON struct {
	Channel              string `json:"channel"`
	AccountID            string `json:"accountId"`
	ConversationID       string `json:"conversationId"`
	ParentConversationID string `json:"parentConversationId"`
}

// entryJSON is the scripting contract of `bot inspect transcript KEY -json`.
type entryJSON struct {
	Seq        uint64            `json:"seq"`
	Role       transcript.Role   `json:"role"`
	Author     string            `json:"author"`
	Text       string            `json:"text"`
	MessageIDs []string          `json:"messageIds"`
	Source     transcript.Source `json:"source"`
	DeliveryID string            `json:"deliveryId"`
	Generation int               `json:"generation"`
	At         time.Time         `json:"at"`
	Meta       map[string]string `json:"meta,omitempty"`
	// Attachments: a user entry's files ({filename, contentType, size, url}).
	Attachments []transcript.Attachment `json:"attachments,omitempty"`
	// Model: the models entry that produced an assistant entry; Usage its
	// tokens ({input, output}).
	Model string            `json:"model,omitempty"`
	Usage *transcript.Usage `json:"usage,omitempty"`
	// Target: on an edit or deletion record, the seq of the entry it changes.
	Target uint64 `json:"target,omitempty"`
	// Deleted: the message was deleted from the chat; text is erased.
	Deleted bool `json:"deleted,omitempty"`
	// Edited: edit records follow; LatestText is the text shown now.
	Edited     bool   `json:"edited,omitempty"`
	LatestText string `json:"latestText,omitempty"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// inspector renders read-only views of a store, for the CLI and for the
// running bot's /inspect endpoint (the same code answers both).
type inspector struct {
	store Store
	red   *redact.Redactor // every byte written passes through it (nil: the shape rules only)
}

// Inspect writes the view what (bindings, jobs, runs [JOB], transcript KEY)
// of st to w, every byte through red: `bot inspect` and the running bot's
// /inspect endpoint answer with it.
func Inspect(ctx context.Context, st Store, red *redact.Redactor, w io.Writer, what string, args []string, asJSON bool) error {
	return inspector{st, red}.write(ctx, w, what, args, asJSON)
}

func (in inspector) write(ctx context.Context, w io.Writer, what string, args []string, asJSON bool) error {
	w = in.red.Writer(w)
	switch what {
	case "bindings":
		return in.bindings(ctx, w, asJSON)
	case "transcript":
		if len(args) != 1 {
			return fmt.Errorf("usage: bot inspect transcript SESSION_KEY [-json]")
		}
		return in.transcript(ctx, w, args[0], asJSON)
	case "jobs":
		return inspectJobs(ctx, in.store, w, asJSON)
	case "runs":
		job := ""
		if len(args) > 0 {
			job = args[0]
		}
		return inspectRuns(ctx, in.store, w, job, asJSON)
	case "usage":
		return in.usage(ctx, w, args, asJSON)
	}
	return fmt.Errorf("unknown view %q: use bindings, jobs, runs [JOB], transcript KEY or usage", what)
}

func (in inspector) bindings(ctx context.Context, w io.Writer, asJSON bool) error {
	recs, err := in.store.Bindings(ctx)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if !asJSON {
		fmt.Fprintln(tw, "BINDING\tSTATUS\tCONVERSATION\tTARGET\tKIND\tBOUND\tLAST ACTIVITY\tENDED")
	}
	for _, r := range recs {
		if asJSON {
			if err := enc.Encode(bindingJSON{BindingID: r.ID, TargetSessionKey: r.TargetSessionKey, TargetKind: r.TargetKind, Conversation: conversationJSON(r.Conversation),
				Status: r.Status, BoundBy: r.BoundBy, BoundAt: r.BoundAt, ExpiresAt: timePtr(r.ExpiresAt()), LastActivityAt: r.LastActivityAt,
				EndedAt: timePtr(r.EndedAt), EndedReason: r.EndedReason}); err != nil {
				return err
			}
			continue
		}
		ended := "-"
		if !r.EndedAt.IsZero() {
			ended = r.EndedAt.UTC().Format(time.RFC3339) + " (" + r.EndedReason + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Status, r.Conversation.ConversationID, r.TargetSessionKey, r.TargetKind,
			r.BoundAt.UTC().Format(time.RFC3339), r.LastActivityAt.UTC().Format(time.RFC3339), ended)
	}
	return tw.Flush()
}

func (in inspector) transcript(ctx context.Context, w io.Writer, key string, asJSON bool) error {
	entries, err := in.store.Range(ctx, key, 0, 0)
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		return fmt.Errorf("session %q: %w (bot inspect transcript takes a session key such as agent:main:discord:channel:<id>)", key, ErrNotFound)
	}
	enc := json.NewEncoder(w)
	for _, f := range transcript.Fold(entries) {
		e, gone, edited := f.Entry, f.Deleted || f.Entry.Deleted, f.Edited // an erased edit record is shown deleted too
		text := f.Latest
		if asJSON {
			ids := e.MessageIDs
			if ids == nil {
				ids = []string{}
			}
			j := entryJSON{Seq: e.Seq, Role: e.Role, Author: e.Author, Text: e.Text, MessageIDs: ids, Source: e.Source,
				DeliveryID: e.DeliveryID, Generation: e.Generation, At: e.At, Meta: e.Meta, Target: e.Target, Deleted: gone, Edited: edited, Attachments: e.Attachments,
				Model: e.Model, Usage: e.Usage}
			if gone {
				j.Text = ""
			}
			if edited {
				j.LatestText = text
			}
			if err := enc.Encode(j); err != nil {
				return err
			}
			continue
		}
		mark := ""
		switch {
		case gone:
			mark, text = " [deleted]", "(deleted)"
		case edited:
			mark = " [edited]"
		case e.IsChange():
			mark = fmt.Sprintf(" [%s of #%d]", e.Source, e.Target)
		}
		fmt.Fprintf(w, "#%d [gen %d] %s %s (%s) %s%s\n  %s\n", e.Seq, e.Generation, e.At.UTC().Format(time.RFC3339), e.Role, e.Source, strings.Join(e.MessageIDs, ","),
			mark, strings.ReplaceAll(text, "\n", "\n  "))
	}
	return nil
}

// inspectHandler serves /inspect/{what} on the running bot (read-only).
// The token and the Host are checked by console.Guard around the whole
// HTTP surface.
func inspectHandler(in inspector) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		var buf strings.Builder
		err := in.write(r.Context(), &buf, r.PathValue("what"), r.URL.Query()["arg"], r.URL.Query().Get("json") != "")
		if err != nil {
			status := http.StatusBadRequest
			if errors.Is(err, ErrNotFound) {
				status = http.StatusNotFound
			}
			http.Error(w, err.Error(), status)
			return
		}
		_, _ = io.WriteString(w, buf.String())
	})
}
