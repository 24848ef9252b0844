package usertext_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/agentbot/agentbot/core/usertext"
)

type shown struct{ msg string }

func (e shown) Error() string       { return "internal: " + e.msg }
func (e shown) UserMessage() string { return e.msg }

// TestForChat: a user-facing error's message is shown (wrapped or not), anything else, or a blank message, is the
// generic text and internal (the caller logs it).
func TestForChat(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		want     string
		internal bool
	}{
		{"user-facing", shown{"there is no job x"}, "⚠️ there is no job x", false},
		{"wrapped", fmt.Errorf("cron remove: %w", shown{"there is no job x"}), "⚠️ there is no job x", false},
		{"blank", shown{"  "}, usertext.GenericFailure, true},
		{"internal", errors.New("disk full"), usertext.GenericFailure, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, internal := usertext.ForChat(tc.err); got != tc.want || internal != tc.internal {
				t.Fatalf("ForChat = %q, %v; want %q, %v", got, internal, tc.want, tc.internal)
			}
		})
	}
}

// TestHints: a hint is rendered in the reader's terms; a reader lacking one gets no sentence with a hole.
func TestHints(t *testing.T) {
	slash := func(h usertext.Hint, id string) string {
		if h == usertext.HintJobRuns {
			return "/cron runs " + id
		}
		return ""
	}
	if got := usertext.Render(slash, usertext.HintJobRuns, "j1"); got != "/cron runs j1" {
		t.Errorf("Render = %q", got)
	}
	if got := usertext.Render(nil, usertext.HintJobRuns, "j1"); got != "" {
		t.Errorf("Render without a reader = %q", got)
	}
	if got := usertext.Line(slash, "j1", "See %s.", usertext.HintJobRuns); got != "See /cron runs j1." {
		t.Errorf("Line = %q", got)
	}
	if got := usertext.Line(slash, "j1", "See %s or %s.", usertext.HintJobRuns, usertext.HintRunJob); got != "" {
		t.Errorf("Line with a hint the reader lacks = %q, want none", got)
	}
}

type hintedErr struct {
	msg  string
	hint usertext.Hint
}

func (e *hintedErr) Error() string { return e.msg }
func (e *hintedErr) Render(f usertext.HintText) string {
	if c := usertext.Render(f, e.hint, ""); c != "" {
		return e.msg + ": " + c + " shows the job ids"
	}
	return e.msg
}
func (e *hintedErr) HintOf() usertext.Hint { return e.hint }

// TestForReader: a hinted error reads in the reader's terms after the operations wrapping it; errors.Is still
// sees it; an error without a hint is returned as it is.
func TestForReader(t *testing.T) {
	tools := func(h usertext.Hint, _ string) string {
		if h == usertext.HintListJobs {
			return "list_jobs"
		}
		return ""
	}
	inner := &hintedErr{msg: `there is no job "x"`, hint: usertext.HintListJobs}
	err := usertext.ForReader(fmt.Errorf("cancel job x: %w", inner), tools)
	if want := `cancel job x: there is no job "x": list_jobs shows the job ids`; err.Error() != want {
		t.Errorf("ForReader = %q, want %q", err, want)
	}
	if !errors.Is(err, inner) {
		t.Error("the rendered error no longer wraps its cause")
	}
	plain := errors.New("disk full")
	if got := usertext.ForReader(plain, tools); got != plain {
		t.Errorf("an error without a hint became %v", got)
	}
	if got := usertext.ForReader(&hintedErr{msg: "m"}, tools); got.Error() != "m" {
		t.Errorf("HintNone rendered as %q", got)
	}
}
