package scheduler_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/scheduler"
)

// slashHints renders hints the way the Discord adapter does (its own test
// holds it to that): the texts below must read exactly as they did when
// the scheduler wrote the commands itself.
func slashHints(h scheduler.Hint, id string) string {
	cmd := map[scheduler.Hint]string{scheduler.HintListJobs: "list", scheduler.HintJobRuns: "runs " + id,
		scheduler.HintRunJob: "run " + id, scheduler.HintRemoveJob: "remove " + id}[h]
	if cmd == "" {
		return ""
	}
	return "`/cron " + cmd + "`"
}

// namesNoCommand fails when a scheduler text carries command syntax of its
// own: what helps next is a Hint the reader's boundary renders.
func namesNoCommand(t *testing.T, what, text string) {
	t.Helper()
	if strings.Contains(text, "/cron") || strings.Contains(text, "`/") {
		t.Errorf("%s names a command: %q", what, text)
	}
}

// TestUserErrorsNameNoCommand (issue 18): the scheduler's own user errors
// say what was wrong and carry a typed hint; on the old code they wrote
// "`/cron list` shows the job ids" and "(`/cron runs <id>`)" into every
// reader's text, the model's included. Rendered with the slash commands
// they read as before.
func TestUserErrorsNameNoCommand(t *testing.T) {
	e := newEnv(t)
	e.chat.block, e.chat.start = make(chan struct{}), make(chan struct{}, 1)
	j := e.add(scheduler.AddRequest{Schedule: "every 1m", Target: "main"})
	e.clk.Set(e.job(j.ID).State.NextRunAt)
	done := make(chan error)
	go func() { done <- e.s.RunDue(ctx) }()
	<-e.chat.start
	_, busy := e.s.RunNow(ctx, j.ID)
	close(e.chat.block)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	_, missing := e.s.RunNow(ctx, "nope")

	for _, tc := range []struct {
		name     string
		err      error
		sentinel error
		hint     scheduler.Hint
		slash    string
	}{
		{"unknown job", missing, scheduler.ErrNotFound, scheduler.HintListJobs, "there is no job \"nope\": `/cron list` shows the job ids"},
		{"running job", busy, scheduler.ErrBusy, scheduler.HintJobRuns,
			"job " + j.ID + " is running right now; try again when it finished (`/cron runs " + j.ID + "`)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ue *scheduler.UserError
			if !errors.Is(tc.err, tc.sentinel) || !errors.As(tc.err, &ue) {
				t.Fatalf("error %v, want a *UserError wrapping %v", tc.err, tc.sentinel)
			}
			namesNoCommand(t, "Error()", tc.err.Error())
			namesNoCommand(t, "UserMessage()", ue.UserMessage())
			namesNoCommand(t, "Render(nil)", ue.Render(nil))
			if ue.Hint != tc.hint {
				t.Errorf("hint %q, want %q", ue.Hint, tc.hint)
			}
			if got := ue.Render(slashHints); got != tc.slash {
				t.Errorf("rendered for Discord %q, want %q", got, tc.slash)
			}
			if got, want := ue.Render(func(scheduler.Hint, string) string { return "" }), ue.Msg; got != want {
				t.Errorf("rendered for a reader without the command %q, want the message alone %q", got, want)
			}
		})
	}
}

// TestNoticesNameNoCommand (issue 18): the notices the scheduler posts
// (failure alert, turned off, interrupted run) carry no command syntax of
// their own. With the chat's hint renderer they read exactly as before;
// without one they end after what happened.
func TestNoticesNameNoCommand(t *testing.T) {
	notices := func(t *testing.T, hints scheduler.HintText) (id string, alert, disabled, interrupted string) {
		t.Helper()
		e := newEnv(t)
		e.hints = hints
		e.s = e.newScheduler()
		e.bg.err = errBoom
		j := e.add(scheduler.AddRequest{Name: "flaky", Schedule: "every 1m", Target: "isolated"})
		for range scheduler.AutoDisableAfter {
			e.clk.Set(e.job(j.ID).State.NextRunAt)
			e.tick()
		}
		for _, d := range e.out.deliveries() {
			if d.Producer.Source != transcript.SourceAlert {
				continue
			}
			if strings.Contains(d.ID, ":disabled:") {
				disabled = d.Text
			} else if alert == "" {
				alert = d.Text
			}
		}
		// An in-chat run the bot was killed in (recover_test.go).
		e2 := newEnv(t)
		e2.hints = hints
		j2 := e2.add(scheduler.AddRequest{Name: "standup", Schedule: "0 9 * * *", Prompt: "ask for updates", Target: "main"})
		release := crashDuringRun(t, e2, j2.ID)
		defer release()
		got := restart(t, e2, 1)
		if alert == "" || disabled == "" || got[0].Producer.Source != transcript.SourceNotice {
			t.Fatalf("notices: alert %q, disabled %q, interrupted %+v", alert, disabled, got[0])
		}
		if j2.ID != j.ID {
			t.Fatalf("job ids %s and %s: the fake ids should repeat per env", j.ID, j2.ID)
		}
		return j.ID, alert, disabled, got[0].Text
	}

	t.Run("no renderer", func(t *testing.T) {
		_, alert, disabled, interrupted := notices(t, nil)
		for what, text := range map[string]string{"alert": alert, "turned off": disabled, "interrupted": interrupted} {
			namesNoCommand(t, what, text)
			if strings.Contains(text, "See ") || strings.Contains(text, "see ") || strings.HasSuffix(text, "\n") {
				t.Errorf("%s keeps a hint sentence without commands: %q", what, text)
			}
		}
		if !strings.HasSuffix(interrupted, "It is not run again.") {
			t.Errorf("interrupted notice %q, want it to end \"It is not run again.\"", interrupted)
		}
	})
	t.Run("slash renderer", func(t *testing.T) {
		id, alert, disabled, interrupted := notices(t, slashHints)
		for what, c := range map[string]struct{ text, tail string }{
			"alert":       {alert, "\nSee `/cron runs " + id + "`."},
			"turned off":  {disabled, "\nSee `/cron runs " + id + "`; to try again use `/cron run " + id + "`, or remove it with `/cron remove " + id + "` and add it anew."},
			"interrupted": {interrupted, "so it has no result. It is not run again; see `/cron runs " + id + "`, or run it now with `/cron run " + id + "`."},
		} {
			if !strings.HasSuffix(c.text, c.tail) {
				t.Errorf("%s notice %q, want it to end %q", what, c.text, c.tail)
			}
		}
	})
}

// TestHintsByPlatform: a notice's hints are rendered in the terms of the
// platform of the chat it goes to (a Matrix room reads `!cron`, not
// Discord's `/cron`); a platform without a renderer names no command.
func TestHintsByPlatform(t *testing.T) {
	hints := scheduler.HintsByPlatform{
		"discord": func(scheduler.Hint, string) string { return "/cron list" },
		"matrix":  func(scheduler.Hint, string) string { return "!cron list" },
	}
	for _, tc := range []struct {
		platform, want string
	}{{"discord", "/cron list"}, {"Matrix", "!cron list"}, {"slack", ""}} {
		h := hints.For(binding.ConversationRef{Channel: tc.platform, ConversationID: "c"})
		ue := &scheduler.UserError{Msg: "there is no job \"x\"", Hint: scheduler.HintListJobs}
		got := ue.Render(h)
		want := "there is no job \"x\""
		if tc.want != "" {
			want += ": " + tc.want + " shows the job ids"
		}
		if got != want {
			t.Errorf("%s: %q, want %q", tc.platform, got, want)
		}
	}
}
