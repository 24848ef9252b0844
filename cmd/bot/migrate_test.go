package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/core/transcript"
	modelusage "github.com/agentbot/agentbot/core/usage"
	"github.com/agentbot/agentbot/internal/procs"
	"github.com/agentbot/agentbot/scheduler"
	"github.com/agentbot/agentbot/scheduler/schedulertest"
	"github.com/agentbot/agentbot/store/bolt"
	"github.com/agentbot/agentbot/store/postgres"
	"github.com/agentbot/agentbot/store/postgres/pgtest"
)

var migT0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

var migUsage = []modelusage.Record{
	{At: migT0, Model: "default", Agent: "main", User: "42", Place: "100", Conversation: "100", SessionKey: "agent:main:discord:channel:100",
		Run: "turn:1", Input: 1200, Output: 300, Cached: 800, Cost: 0.0021},
	{At: migT0.Add(time.Minute), Model: "backup", Agent: "main", User: "43", SessionKey: "agent:main:subagent:s1", Run: "agent:main:subagent:s1",
		Input: 10, Output: 1},
}

var migProc = procs.Record{Host: "h1", PGID: 4242, Kind: procs.KindACP}

func migRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// migConfig writes a config whose bolt store is bot.db beside it.
func migConfig(t *testing.T) (cfgPath, storePath string) {
	t.Helper()
	dir := t.TempDir()
	storePath = filepath.Join(dir, "bot.db")
	cfgPath = filepath.Join(dir, "config.yaml")
	body := fmt.Sprintf("store:\n  path: %q\nhttp:\n  listen: \"\"\n", storePath)
	if err := os.WriteFile(cfgPath, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfgPath, storePath
}

func migSeed(t *testing.T, storePath string, fill func(st *bolt.Store)) {
	t.Helper()
	st, err := bolt.Open(storePath, bolt.Options{LockTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	fill(st)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestMigrateStore(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	cfgPath, storePath := migConfig(t)
	thread := binding.ConversationRef{Channel: "discord", AccountID: "default", ConversationID: "900", ParentConversationID: "100"}
	const child = "agent:main:subagent:s1"
	const chat = "agent:main:discord:channel:100"
	var boltEntries map[string][]transcript.Entry
	migSeed(t, storePath, func(st *bolt.Store) {
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		must(st.PutBindings(ctx,
			binding.Record{ID: "b1", TargetSessionKey: child, TargetKind: binding.KindSubagent, Conversation: thread,
				Status: binding.StatusActive, BoundAt: migT0, LastActivityAt: migT0, IdleTimeout: time.Hour},
			binding.Record{ID: "b0", TargetSessionKey: child, Conversation: thread, Status: binding.StatusEnded,
				EndedAt: migT0, EndedReason: binding.ReasonManual}))
		for i, text := range []string{"hi", "hello", "again"} {
			_, _, err := st.Append(ctx, chat, transcript.Entry{Role: transcript.RoleUser, Text: text,
				MessageIDs: []string{"m" + text}, DeliveryID: "d-" + text, Generation: i / 2, At: migT0.Add(time.Duration(i) * time.Nanosecond)})
			must(err)
		}
		must(st.SetGeneration(ctx, chat, 1))
		_, _, err := st.Append(ctx, child, transcript.Entry{Role: transcript.RoleAssistant, Text: "intro", Source: transcript.SourceIntro})
		must(err)
		must(st.SetGeneration(ctx, "agent:main:discord:channel:empty", 3))
		must(st.PutDelivery(ctx, delivery.Record{Delivery: delivery.Delivery{ID: "d-hello", Target: thread, Text: "hello"},
			State: delivery.StateDelivered, MessageIDs: []string{"mhello"}, CreatedAt: migT0}))
		must(st.PutSessionInfo(ctx, session.Info{Key: child, AgentID: "main", Kind: session.KindSubagent,
			Status: session.StatusRunning, Thread: "900", BindingID: "b1", CreatedAt: migT0}))
		must(st.PutWebhook(ctx, "100", "wh1", "tok1"))
		must(st.PutWebhook(ctx, "555", "orphan", "tok")) // its channel is named nowhere
		job := schedulertest.SampleJob("j1")
		must(st.PutJob(ctx, job))
		for i, trig := range []string{scheduler.TriggerSchedule, scheduler.TriggerCatchUp, scheduler.TriggerManual} {
			at := migT0.Add(time.Duration(i) * time.Hour)
			must(st.PutRun(ctx, scheduler.Run{JobID: "j1", RunID: trig, Trigger: trig, ScheduledAt: at, StartedAt: at,
				Status: scheduler.StatusOK}, 0))
		}
		_, err = st.ClaimInstant(ctx, "j1", migT0.Add(time.Hour))
		must(err)
		must(st.AddUsage(ctx, migUsage...))
		must(st.RecordProcess(ctx, migProc))
		boltEntries = map[string][]transcript.Entry{}
		for _, k := range []string{chat, child} {
			es, err := st.Tail(ctx, k, 100)
			must(err)
			boltEntries[k] = es
		}
	})

	code, stdout, stderr := migRun(t, "migrate-store", "-config", cfgPath, "-to", dsn)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"bindings     2", "transcripts  3 sessions, 4 entries", "deliveries   1", "sessions     1",
		"jobs         1", "runs         3", "ledger       1", "webhooks     1 (of 4 channels", "usage        2 records", "processes    1"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}

	pg, err := postgres.Open(ctx, dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	for k, want := range boltEntries {
		got, err := pg.Tail(ctx, k, 100)
		if err != nil || len(got) != len(want) {
			t.Fatalf("%s: %d entries, %v; want %d", k, len(got), err, len(want))
		}
		for i := range got {
			if got[i].Seq != want[i].Seq || got[i].Text != want[i].Text || got[i].Generation != want[i].Generation ||
				!got[i].At.Equal(want[i].At) || got[i].DeliveryID != want[i].DeliveryID || !slices.Equal(got[i].MessageIDs, want[i].MessageIDs) {
				t.Fatalf("%s entry %d: got %+v want %+v", k, i, got[i], want[i])
			}
		}
	}
	if g, _ := pg.Generation(ctx, chat); g != 1 {
		t.Fatalf("generation = %d, want 1", g)
	}
	if g, _ := pg.Generation(ctx, "agent:main:discord:channel:empty"); g != 3 {
		t.Fatalf("generation of a session without entries = %d, want 3", g)
	}
	if _, existed, _ := pg.Append(ctx, chat, transcript.Entry{DeliveryID: "d-hi"}); !existed {
		t.Fatal("copied delivery id not deduped")
	}
	if e, _, _ := pg.ByMessageID(ctx, chat, "mhello"); e.Seq != 2 {
		t.Fatalf("ByMessageID = %+v", e)
	}
	if ok, _ := pg.ClaimInstant(ctx, "j1", migT0.Add(time.Hour)); ok {
		t.Fatal("an instant the bolt ledger held was claimable again")
	}
	if id, tok, ok, _ := pg.Webhook(ctx, "100"); !ok || id != "wh1" || tok != "tok1" {
		t.Fatalf("webhook = %q %q %v", id, tok, ok)
	}
	if bs, _ := pg.Bindings(ctx); len(bs) != 2 || bs[1].IdleTimeout != time.Hour {
		t.Fatalf("bindings = %+v", bs)
	}

	if rs, err := pg.Usage(ctx, modelusage.Filter{}); err != nil || !reflect.DeepEqual(rs, migUsage) {
		t.Fatalf("usage records %+v %v, want %+v", rs, err, migUsage)
	}
	if ps, err := pg.Processes(ctx); err != nil || len(ps) != 1 || ps[0].Key() != migProc.Key() {
		t.Fatalf("processes %+v %v", ps, err)
	}
	// The imported history is queued for the recall index.
	if cs, err := pg.Pending(ctx, 100); err != nil || len(cs) != 4 {
		t.Fatalf("recall changes queued %d %v, want the 4 imported entries", len(cs), err)
	}

	// A second run refuses the now non-empty database.
	code, _, stderr = migRun(t, "migrate-store", "-config", cfgPath, "-to", dsn)
	if code != exitProblems || !strings.Contains(stderr, "not empty") {
		t.Fatalf("second run: exit %d, stderr %q", code, stderr)
	}
	// No DSN at all is a usage error.
	code, _, stderr = migRun(t, "migrate-store", "-config", cfgPath)
	if code != exitUsage || !strings.Contains(stderr, "-to DSN") {
		t.Fatalf("without -to: exit %d, stderr %q", code, stderr)
	}
}
