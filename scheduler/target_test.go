package scheduler_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/sessionkey"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/scheduler"
)

func TestAddModes(t *testing.T) {
	own := sessionkey.ForConversation("main", chat)
	other := sessionkey.ForConversation("main", binding.ConversationRef{Channel: "discord", ConversationID: "300"})
	tests := []struct {
		name, target, to string
		wantTarget       string
		wantMode         scheduler.Mode
		wantTo           string
	}{
		{"main", "main", "", "main", scheduler.ModeInChat, ""},
		{"default is main", "", "", "main", scheduler.ModeInChat, ""},
		{"main with to = own chat", "main", "channel:100", "main", scheduler.ModeInChat, "channel:100"},
		{"to elsewhere defaults to isolated", "", "<#200>", "isolated", scheduler.ModeBackground, "channel:200"},
		{"isolated", "Isolated", "", "isolated", scheduler.ModeBackground, ""},
		{"current", "current", "user:42", "current", scheduler.ModeBackground, "user:42"},
		{"session own chat", "session:" + other, "", "session:" + other, scheduler.ModeInChat, ""},
		{"session delivering to its chat", "session:" + other, "channel:300", "session:" + other, scheduler.ModeInChat, "channel:300"},
		{"session delivering elsewhere is background", "session:" + own, "channel:200", "session:" + own, scheduler.ModeBackground, "channel:200"},
		{"session of a subagent is background", "session:agent:main:subagent:x", "", "session:agent:main:subagent:x", scheduler.ModeBackground, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			j := e.add(scheduler.AddRequest{Schedule: "every 1h", Target: tc.target, To: tc.to})
			if j.Target != tc.wantTarget || j.Mode() != tc.wantMode || j.StoredMode != tc.wantMode || j.To != tc.wantTo {
				t.Fatalf("job target=%q mode=%s to=%q", j.Target, j.Mode(), j.To)
			}
			if scheduler.RequiredMode(j) != j.Mode() {
				t.Fatal("stored mode differs from the required one")
			}
			desc := e.s.Describe(j)
			want := map[scheduler.Mode]string{scheduler.ModeInChat: "In-chat", scheduler.ModeBackground: "Background"}[tc.wantMode]
			if !strings.Contains(desc, want) {
				t.Fatalf("describe %q lacks %q", desc, want)
			}
		})
	}
}

func TestAddRefusals(t *testing.T) {
	tests := []struct {
		name string
		req  scheduler.AddRequest
		want []string
	}{
		{"in-chat to elsewhere", scheduler.AddRequest{Schedule: "every 1h", Prompt: "x", Target: "main", To: otherChannel, CreatedIn: chat},
			[]string{"in-chat", "channel:200", "`isolated`", "`current`"}},
		{"bad target", scheduler.AddRequest{Schedule: "every 1h", Prompt: "x", Target: "elsewhere", CreatedIn: chat},
			[]string{"not a target", "session:<key>"}},
		{"empty session key", scheduler.AddRequest{Schedule: "every 1h", Prompt: "x", Target: "session:", CreatedIn: chat},
			[]string{"not a target"}},
		{"bad to", scheduler.AddRequest{Schedule: "every 1h", Prompt: "x", To: "#general", CreatedIn: chat},
			[]string{"channel:<id>", "user:<id>"}},
		{"empty prompt", scheduler.AddRequest{Schedule: "every 1h", CreatedIn: chat}, []string{"prompt is empty"}},
		{"bad schedule", scheduler.AddRequest{Schedule: "daily", Prompt: "x", CreatedIn: chat}, []string{"a cron expression has 5"}},
		{"past at", scheduler.AddRequest{Schedule: "at 2020-01-01T00:00:00Z", Prompt: "x", CreatedIn: chat}, []string{"in the past"}},
		{"main without chat", scheduler.AddRequest{Schedule: "every 1h", Prompt: "x", Target: "main"}, []string{"isolated"}},
		{"isolated without anywhere", scheduler.AddRequest{Schedule: "every 1h", Prompt: "x", Target: "isolated"}, []string{"add `to`"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			_, err := e.s.Add(ctx, tc.req)
			var ue *scheduler.UserError
			if !errors.As(err, &ue) {
				t.Fatalf("err = %v, want *UserError", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(ue.Msg, w) {
					t.Fatalf("message %q lacks %q", ue.Msg, w)
				}
			}
			if js, _ := e.s.List(ctx); len(js) != 0 {
				t.Fatal("refused job stored")
			}
		})
	}
}

func TestCurrentSnapshotTakenAtCreation(t *testing.T) {
	e := newEnv(t)
	key := sessionkey.ForConversation("main", chat)
	e.hist.entries[key] = []transcript.Entry{{Seq: 1, Text: "before"}}
	j := e.add(scheduler.AddRequest{Schedule: "every 10m", Target: "current", To: otherChannel})
	e.hist.entries[key] = append(e.hist.entries[key], transcript.Entry{Seq: 2, Text: "after creation"})
	e.clk.Advance(10 * time.Minute)
	e.tick()
	seed := e.bg.runs()[0].Seed
	if len(seed) != 1 || seed[0].Text != "before" || len(e.hist.asked) != 1 {
		t.Fatalf("seed %+v asked %v", seed, e.hist.asked)
	}
	if len(e.job(j.ID).Seed) != 1 {
		t.Fatal("snapshot not stored with the job")
	}
}

func TestInChatSessionTargetRunsInItsChat(t *testing.T) {
	e := newEnv(t)
	other := binding.ConversationRef{Channel: "discord", AccountID: "default", ConversationID: "user:77"}
	key := sessionkey.ForConversation("main", other)
	e.add(scheduler.AddRequest{Name: "dm", Schedule: "every 10m", Target: "session:" + key})
	e.clk.Advance(10 * time.Minute)
	e.tick()
	in := e.chat.runs()[0]
	if in.Conversation.ConversationID != "user:77" {
		t.Fatalf("run %+v", in)
	}
	if r := e.runs(in.JobID)[0]; r.SessionKey != key {
		t.Fatalf("run in %s, want %s", r.SessionKey, key)
	}
}

// TestInChatRunNamesTheSessionTheTurnRanIn (issue 28 item 4): the run
// record names the session the turn ran in (a bound chat's bound session,
// as the session layer routes it when the turn runs), not the chat's own
// session computed beside it.
func TestInChatRunNamesTheSessionTheTurnRanIn(t *testing.T) {
	e := newEnv(t)
	e.chat.routed = "agent:main:subagent:focused"
	j := e.add(scheduler.AddRequest{Name: "digest", Schedule: "every 10m", Target: scheduler.TargetMain})
	e.clk.Advance(10 * time.Minute)
	e.tick()
	if rs := e.runs(j.ID); len(rs) != 1 || rs[0].SessionKey != "agent:main:subagent:focused" {
		t.Fatalf("runs %+v, want one in the bound session", rs)
	}
}

func TestDescribe(t *testing.T) {
	e := newEnv(t)
	j := e.add(scheduler.AddRequest{Name: "standup", Schedule: "30 9 * * 1-5", TZ: "Europe/Berlin", Target: "main"})
	d := e.s.Describe(j)
	for _, w := range []string{"standup", j.ID, "weekdays at 09:30 (Europe/Berlin)", "next run Tue 2026-03-03 09:30 CET", "In-chat", "<#100>"} {
		if !strings.Contains(d, w) {
			t.Fatalf("%q lacks %q", d, w)
		}
	}
	j = e.add(scheduler.AddRequest{Name: "digest", Schedule: "every 2h", Target: "isolated", To: "user:42"})
	d = e.s.Describe(j)
	for _, w := range []string{"every 2h", "Background", "fresh session each run", "DM with <@42>"} {
		if !strings.Contains(d, w) {
			t.Fatalf("%q lacks %q", d, w)
		}
	}
}

// TestDeletedMessageLeavesJobSeeds: a message deleted from the chat is
// erased from the snapshot of a `target: current` job (store and runs).
func TestDeletedMessageLeavesJobSeeds(t *testing.T) {
	e := newEnv(t)
	key := sessionkey.ForConversation("main", chat)
	e.hist.entries[key] = []transcript.Entry{{Seq: 1, SessionKey: key, Text: "keep me"}, {Seq: 2, SessionKey: key, Text: "my secret s3"}}
	j := e.add(scheduler.AddRequest{Schedule: "every 10m", Target: "current", To: otherChannel})
	for _, other := range []transcript.Entry{{Seq: 2, SessionKey: "another"}, {Seq: 2, SessionKey: key}} {
		if err := e.s.EraseEntry(ctx, other); err != nil {
			t.Fatal(err)
		}
	}
	seed := e.job(j.ID).Seed
	if len(seed) != 2 || seed[0].Text != "keep me" || seed[1].Text != "" || !seed[1].Deleted {
		t.Fatalf("stored seed %+v", seed)
	}
	e.clk.Advance(10 * time.Minute)
	e.tick()
	run := e.bg.runs()[0].Seed
	if len(run) != 1 || run[0].Text != "keep me" {
		t.Fatalf("run seed %+v", run)
	}
}
