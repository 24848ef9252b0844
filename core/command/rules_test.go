package command

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/core/usertext"
	"github.com/agentbot/agentbot/scheduler"
)

// TestWhoMayDoWhat (invariant 13): every check a command makes is asked of
// the authority (or of Jobs/ACP, which the model's tools go through too), in
// the order that keeps refused actions from happening; the platform's
// access policy (Admit) is asked only of non-operators starting a subagent.
func TestWhoMayDoWhat(t *testing.T) {
	admitNone := func(context.Context) string { return "You may not start agent work here (test.access)." }
	tests := []struct {
		name      string
		setup     func(w *world)
		v         Invocation
		wantAsked []string
		wantText  string
		// done reports whether the action happened.
		done func(w *world) bool
		want bool
	}{
		{name: "access refuses a subagent", v: Invocation{Name: "spawn", UserID: "u1", Options: map[string]any{"task": "go"}, Admit: admitNone},
			wantAsked: []string{"operator u1"}, wantText: "ERR You may not start agent work here (test.access).",
			done: func(w *world) bool { return len(w.sessions.spawned) > 0 }, want: false},
		{name: "operators are not subject to access", v: Invocation{Name: "spawn", UserID: "op", Options: map[string]any{"task": "go"}, Admit: admitNone},
			wantAsked: []string{"operator op"},
			done:      func(w *world) bool { return len(w.sessions.spawned) > 0 }, want: true},
		{name: "no access policy: nothing asked", v: Invocation{Name: "spawn", UserID: "u1", Options: map[string]any{"task": "go"}},
			done: func(w *world) bool { return len(w.sessions.spawned) > 0 }, want: true},
		{name: "an external agent applies its own rule, not access", v: Invocation{Name: "spawn", UserID: "u1", Options: map[string]any{"task": "go", "agent": "coder"}, Admit: admitNone},
			done: func(w *world) bool { return len(w.acp.starts) > 0 && len(w.sessions.spawned) == 0 }, want: true},
		{name: "stop asks MayStop before stopping", setup: func(w *world) { w.sessions.running[mainKey] = session.Run{ID: 1, Owner: "bob"} },
			v: Invocation{Name: "stop", UserID: "u1"}, wantAsked: []string{"stop u1 bob"},
			wantText: "ERR Only its owner or an operator can stop this conversation's turn.",
			done:     func(w *world) bool { return len(w.sessions.stopped) > 0 }, want: false},
		{name: "focus asks MayFocus before binding", setup: func(w *world) { w.sessions.infos = []session.Info{sub}; w.auth.refuseFocus = subKey },
			v: Invocation{Name: "focus", UserID: "u1", Conversation: thread, Options: map[string]any{"target": subKey}}, wantAsked: []string{"focus u1 " + subKey},
			wantText: "ERR You cannot view " + subKey + ".",
			done:     func(w *world) bool { return len(w.bindings.binds) > 0 || len(w.threads.names) > 0 }, want: false},
		{name: "unfocus of another's binding asks for an operator", setup: func(w *world) {
			w.bindings.bound[thread.Key()] = binding.Record{ID: "b1", BoundBy: "bob", Conversation: thread}
		}, v: Invocation{Name: "unfocus", UserID: "u1", Conversation: thread}, wantAsked: []string{"operator u1"},
			wantText: "ERR Only bob can unfocus this conversation.",
			done:     func(w *world) bool { return len(w.bindings.unbinds) > 0 }, want: false},
		{name: "the binder needs no operator", setup: func(w *world) {
			w.bindings.bound[thread.Key()] = binding.Record{ID: "b1", BoundBy: "u1", Conversation: thread}
		}, v: Invocation{Name: "unfocus", UserID: "u1", Conversation: thread},
			done: func(w *world) bool { return len(w.bindings.unbinds) == 1 && w.bindings.unbinds[0].ID == "b1" }, want: true},
		{name: "a system binding is anyone's", setup: func(w *world) {
			w.bindings.bound[thread.Key()] = binding.Record{ID: "b1", BoundBy: "system", Conversation: thread}
		}, v: Invocation{Name: "session", Sub: "max-age", UserID: "u1", Conversation: thread, Options: map[string]any{"duration": "2d"}},
			done: func(w *world) bool { return slices.Equal(w.bindings.timeouts, []string{"b1 - 48h0m0s"}) }, want: true},
		{name: "cron add is decided behind Jobs", v: Invocation{Name: "cron", Sub: "add", UserID: "u1", Options: map[string]any{"schedule": "every 1h", "prompt": "p"}},
			wantText: "ERR Only an operator can schedule jobs.",
			done:     func(w *world) bool { return len(w.jobs.added) > 0 }, want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld()
			if tc.setup != nil {
				tc.setup(w)
			}
			v := tc.v
			v.Platform = matrixWords
			if !v.Conversation.Valid() {
				v.Conversation = channel
			}
			r, err := w.commands().Run(context.Background(), v)
			if !slices.Equal(w.auth.asked, tc.wantAsked) {
				t.Errorf("authority asked %q, want %q", w.auth.asked, tc.wantAsked)
			}
			if tc.wantText != "" {
				if got := outcome(r, err); got != tc.wantText {
					t.Errorf("reads %q, want %q", got, tc.wantText)
				}
			}
			if got := tc.done(w); got != tc.want {
				t.Errorf("action happened = %v, want %v (reply %q, err %v)", got, tc.want, r.Text, err)
			}
		})
	}
}

// TestCommandsPassWhatWasAsked: the options, the invoker and the
// conversation reach the collaborators as given.
func TestCommandsPassWhatWasAsked(t *testing.T) {
	ctx := context.Background()
	w := newWorld()
	w.sessions.infos = []session.Info{{Key: subKey, AgentID: "main", Kind: session.KindSubagent, Label: "a very long label that goes on", SpawnedBy: "u1"}}
	c := w.commands()
	no := false
	if _, err := c.Run(ctx, Invocation{Platform: matrixWords, Conversation: channel, UserID: "u1", Name: "spawn",
		Options: map[string]any{"task": "  sum up  ", "label": "s", "agent": "main", "thread": no}}); err != nil {
		t.Fatal(err)
	}
	want := session.SpawnRequest{Task: "sum up", Label: "s", AgentID: "main", Thread: &no, Requester: channel, RequestedBy: "u1"}
	if got := w.sessions.spawned; len(got) != 1 || got[0].Task != want.Task || got[0].Label != want.Label || got[0].AgentID != want.AgentID ||
		got[0].Thread == nil || *got[0].Thread || got[0].Requester != channel || got[0].RequestedBy != "u1" {
		t.Errorf("spawned %+v, want %+v", got, want)
	}
	// A bool option given as a string (a stale registration) reads as absent.
	if _, err := c.Run(ctx, Invocation{Platform: matrixWords, Conversation: channel, UserID: "u1", Name: "spawn", Options: map[string]any{"task": "x", "thread": "false"}}); err != nil {
		t.Fatal(err)
	}
	if got := w.sessions.spawned[1].Thread; got != nil {
		t.Errorf("thread = %v from a string option, want nil", *got)
	}

	if _, err := c.Run(ctx, Invocation{Platform: matrixWords, Conversation: channel, UserID: "u1", Name: "focus", Options: map[string]any{"target": subKey}}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(w.threads.names, []string{"🤖 a very long label that goes on"}) || w.threads.created[0] != channel {
		t.Errorf("threads created %q under %v", w.threads.names, w.threads.created)
	}
	if b := w.bindings.binds; len(b) != 1 || b[0].TargetSessionKey != subKey || b[0].TargetKind != binding.KindSubagent ||
		b[0].Conversation != w.threads.thread || b[0].BoundBy != "u1" {
		t.Errorf("bound %+v", b)
	}

	w.jobs.operators["u1"] = true
	if _, err := c.Run(ctx, Invocation{Platform: matrixWords, Conversation: thread, UserID: "u1", Name: "cron", Sub: "add",
		Options: map[string]any{"schedule": "every 10m", "prompt": "ping", "target": "isolated", "tz": "Europe/Berlin", "to": "user:u2"}}); err != nil {
		t.Fatal(err)
	}
	wantAdd := CronAdd{Schedule: "every 10m", Prompt: "ping", Target: "isolated", TZ: "Europe/Berlin", To: "user:u2", CreatedBy: "u1", CreatedIn: thread}
	if len(w.jobs.added) != 1 || w.jobs.added[0] != wantAdd {
		t.Errorf("cron add %+v, want %+v", w.jobs.added, wantAdd)
	}
}

// TestFailureText: usertext.ForChat (issue 18's one rule): a user-facing error is shown, its
// secrets redacted; any other error shows the generic text and is reported
// as internal (the boundary logs it once), none of its words shown.
func TestFailureText(t *testing.T) {
	token := "MTIzNDU2Nzg5MDEyMzQ1Njc4.GaBcDe.abcdefghijklmnopqrstuvwxyz0123"
	for _, tc := range []struct {
		name     string
		err      error
		want     string
		internal bool
	}{
		{"user error", userErrf("Usage: !cron add|list"), "⚠️ Usage: !cron add|list", false},
		{"wrapped user error", fmt.Errorf("cron list: %w", userErrf("pick one")), "⚠️ pick one", false},
		{"secret in a user error", userErrf("bad token %s", token), "⚠️ bad token [redacted]", false},
		{"internal", fmt.Errorf("cron list: %w", errInternal), usertext.GenericFailure, true},
		{"a refusal not made a sentence is internal", &authz.Refusal{Msg: "no"}, usertext.GenericFailure, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, internal := usertext.ForChat(tc.err)
			if got != tc.want || internal != tc.internal {
				t.Errorf("ForChat = %q, %v; want %q, %v", got, internal, tc.want, tc.internal)
			}
			if internal && strings.Contains(got, "disk") {
				t.Errorf("internal words shown: %q", got)
			}
		})
	}
}

// TestRunKeepsTheCause: a rendered hint keeps the scheduler's error in the
// chain (errors.Is still finds it).
func TestRunKeepsTheCause(t *testing.T) {
	w := newWorld()
	w.jobs.err = fmt.Errorf("job x: %w", &scheduler.UserError{Msg: `there is no job "x"`, Err: scheduler.ErrNotFound, Hint: scheduler.HintListJobs})
	_, err := w.commands().Run(context.Background(), Invocation{Platform: matrixWords, Conversation: channel, UserID: "u1", Name: "cron", Sub: "runs", Options: map[string]any{"id": "x"}})
	if !errors.Is(err, scheduler.ErrNotFound) {
		t.Errorf("err = %v, want it to wrap scheduler.ErrNotFound", err)
	}
}

// TestPlatformDefaults: a platform that sets only its prefix writes plain
// ids and name=value options (quoted when they hold a space), and renders
// every scheduler hint as its own command.
func TestPlatformDefaults(t *testing.T) {
	p := Platform{Prefix: "!"}
	for _, tc := range []struct{ got, want string }{
		{p.Command("cron", "list"), "!cron list"},
		{p.Command("agents"), "!agents"},
		{p.option("thread", "false"), "thread=false"},
		{p.option("task", "sum it up"), `task="sum it up"`},
		{p.mention("@alice:example.org"), "@alice:example.org"},
		{p.link(binding.ConversationRef{ConversationID: "$ev", ParentConversationID: "!room:example.org"}), "$ev"},
		{p.JobCommand(scheduler.HintListJobs, "j1"), "`!cron list`"},
		{p.JobCommand(scheduler.HintJobRuns, "j1"), "`!cron runs j1`"},
		{p.JobCommand(scheduler.HintRunJob, "j1"), "`!cron run j1`"},
		{p.JobCommand(scheduler.HintRemoveJob, "j1"), "`!cron remove j1`"},
		{p.JobCommand(scheduler.HintNone, "j1"), ""},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		err  bool
	}{
		{"off", 0, false},
		{"OFF", 0, false},
		{"disabled", 0, false},
		{"none", 0, false},
		{"0", 0, false},
		{"24", 24 * time.Hour, false},
		{"1.5", 90 * time.Minute, false},
		{"2d", 48 * time.Hour, false},
		{"30m", 30 * time.Minute, false},
		{"24h", 24 * time.Hour, false},
		{" 1h30m ", 90 * time.Minute, false},
		{"1m", time.Minute, false},
		{"365d", 365 * 24 * time.Hour, false},
		{"30s", 0, true},
		{"0.001", 0, true}, // 3.6 s: below the one-minute minimum
		{"400d", 0, true},  // above the one-year maximum
		{"9000", 0, true},  // hours: above the maximum
		{"-5m", 0, true},
		{"abc", 0, true},
		{"", 0, true},
	}
	for _, tc := range tests {
		got, err := parseDuration(tc.in, discordWords)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v, err %v", tc.in, got, err, tc.want, tc.err)
		}
		var ue *userError
		if err != nil && !errors.As(err, &ue) {
			t.Errorf("parseDuration(%q) error %v is not a user error", tc.in, err)
		}
	}
}

// FuzzParseDuration: any duration is accepted within bounds (or off) or
// refused with the usage text.
func FuzzParseDuration(f *testing.F) {
	for _, d := range []string{"off", "0", "1", "0.001", "1e300", "NaN", "inf", "-1h", "366d", "365d", "1m", "59s", "9223372036854775807ns", "d", "1.5d", " 2H "} {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, duration string) {
		d, err := parseDuration(duration, discordWords)
		if err != nil {
			var ue *userError
			if !errors.As(err, &ue) || !strings.HasPrefix(ue.msg, "Usage: /session") {
				t.Fatalf("parseDuration(%q) error %v is not the usage text", duration, err)
			}
			return
		}
		if d != 0 && (d < time.Minute || d > 365*24*time.Hour) {
			t.Fatalf("parseDuration(%q) = %v, outside 1m..1y", duration, d)
		}
	})
}

// TestCronListInPublicRepliesOnlyTheRoomsOwnJobs: where every reply is
// public (Matrix), /cron list shows only the jobs made in and posting into
// this room (a thread counts as its room), never another room's or a
// DM's prompts, whatever the caller may see elsewhere (issue 26).
func TestCronListInPublicRepliesOnlyTheRoomsOwnJobs(t *testing.T) {
	t.Parallel()
	other, dm := ref("chan-9", ""), ref("user:victim", "")
	jobs := []Job{
		{ID: "here", Name: "here", Mode: "in-chat", CreatedIn: channel, PostsTo: channel, Enabled: true},
		{ID: "thread", Name: "thread", Mode: "in-chat", CreatedIn: thread, PostsTo: thread, Enabled: true},
		{ID: "other", Name: "other", Mode: "in-chat", CreatedIn: other, PostsTo: other, Enabled: true},
		{ID: "dm", Name: "dm", Mode: "in-chat", CreatedIn: dm, PostsTo: dm, Enabled: true},
		{ID: "into-dm", Name: "into-dm", Mode: "background", CreatedIn: channel, PostsTo: dm, Enabled: true},
		{ID: "posts-unknown", Name: "posts-unknown", Mode: "background", CreatedIn: channel, Enabled: true},
	}
	for _, tc := range []struct {
		name   string
		public bool
		want   []string
	}{{"public replies", true, []string{"here", "thread"}}, {"ephemeral replies", false, []string{"here", "thread", "other", "dm", "into-dm", "posts-unknown"}}} {
		w := newWorld()
		w.jobs.jobs = jobs
		p := matrixWords
		p.PublicReplies = tc.public
		r, err := w.commands().Run(context.Background(), Invocation{Platform: p, Conversation: thread, UserID: "op", Name: "cron", Sub: "list"})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, j := range jobs {
			if strings.Contains(r.Text, "`"+j.ID+"`") {
				got = append(got, j.ID)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: listed %v, want %v\n%s", tc.name, got, tc.want, r.Text)
		}
	}
}
