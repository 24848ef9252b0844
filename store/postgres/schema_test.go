package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	sess "github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/store/postgres/pgtest"
)

func version(t *testing.T, s *Store) int {
	t.Helper()
	var v int
	if err := s.pool.QueryRow(context.Background(), `SELECT version FROM schema_version`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestSchemaVersion(t *testing.T) {
	s := openTemp(t)
	if s.SchemaVersion() != SchemaVersion || version(t, s) != SchemaVersion {
		t.Fatalf("SchemaVersion() = %d, stored %d, want %d", s.SchemaVersion(), version(t, s), SchemaVersion)
	}
	// Reopening an up-to-date database changes nothing.
	s = reopen(t, s)
	if version(t, s) != SchemaVersion {
		t.Fatalf("version after reopen = %d", version(t, s))
	}
}

// Processes starting together on an empty database: the advisory lock makes
// one migrate and the others find the work done.
func TestConcurrentOpenMigratesOnce(t *testing.T) {
	dsn := pgtest.DSN(t)
	const n = 6
	var wg sync.WaitGroup
	errs := make([]error, n)
	stores := make([]*Store, n)
	for i := range n {
		wg.Go(func() { stores[i], errs[i] = Open(context.Background(), dsn, Options{}) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Open %d: %v", i, err)
		}
		defer stores[i].Close()
		if stores[i].SchemaVersion() != SchemaVersion {
			t.Fatalf("Open %d: version %d", i, stores[i].SchemaVersion())
		}
	}
	if _, _, err := stores[0].Append(context.Background(), "k", transcript.Entry{Text: "x"}); err != nil {
		t.Fatal(err)
	}
}

func TestMigrationsIncremental(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	extra := append(migrations[:len(migrations):len(migrations)],
		migration{name: "test column", sql: `ALTER TABLE webhooks ADD COLUMN note text`})
	s, err := open(ctx, dsn, Options{}, migrations)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutWebhook(ctx, "c1", "w1", "tok"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = open(ctx, dsn, Options{}, extra)
	if err != nil {
		t.Fatalf("open with a new migration: %v", err)
	}
	defer s.Close()
	if s.SchemaVersion() != len(extra) || version(t, s) != len(extra) {
		t.Fatalf("version = %d/%d, want %d", s.SchemaVersion(), version(t, s), len(extra))
	}
	if id, _, ok, err := s.Webhook(ctx, "c1"); err != nil || !ok || id != "w1" {
		t.Fatalf("data lost across migration: %q %v %v", id, ok, err)
	}
	// The current binary refuses the newer database and leaves it alone.
	_, err = Open(ctx, dsn, Options{})
	if !errors.Is(err, ErrSchemaTooNew) || !strings.Contains(err.Error(), "upgrade the bot") {
		t.Fatalf("Open on a newer schema: %v, want ErrSchemaTooNew", err)
	}
	if version(t, s) != len(extra) {
		t.Fatal("refused Open changed the version")
	}
}

func TestFailedMigrationRollsBack(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	bad := append(migrations[:len(migrations):len(migrations)], migration{name: "broken", sql: `SELECT nope FROM nowhere`})
	if _, err := open(ctx, dsn, Options{}, bad); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("migration %d (broken)", len(bad))) {
		t.Fatalf("broken migration: %v", err)
	}
	// Nothing applied, not even migration 1: the next Open starts from 0.
	s, err := Open(ctx, dsn, Options{})
	if err != nil {
		t.Fatalf("Open after failed migration: %v", err)
	}
	defer s.Close()
	if version(t, s) != SchemaVersion {
		t.Fatalf("version = %d", version(t, s))
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := Open(ctx, "", Options{}); err == nil {
		t.Fatal("empty dsn accepted")
	}
	_, err := Open(ctx, "postgres://user:secret@127.0.0.1:1/db?connect_timeout=1", Options{ConnectTimeout: 2e9})
	if err == nil {
		t.Fatal("unreachable server accepted")
	}
	if strings.Contains(err.Error(), "secret") {
		t.Fatalf("error leaks the password: %v", err)
	}
}

func TestSessionInfos(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	if got, err := s.SessionInfos(ctx); err != nil || len(got) != 0 {
		t.Fatalf("empty: %v %v", got, err)
	}
	if err := s.PutSessionInfo(ctx, sess.Info{}); err == nil {
		t.Fatal("empty key accepted")
	}
	a := sess.Info{Key: "agent:main:subagent:a", AgentID: "main", Kind: sess.KindSubagent, Status: sess.StatusRunning,
		Task: "t \x00 ✓", Pending: []sess.PendingTurn{{Message: sess.Message{MessageID: "m1", Text: "hi"}}},
		LastInbound: map[string]string{"c1": "m1"}}
	b := sess.Info{Key: "agent:main:discord:channel:1", AgentID: "main", Kind: sess.KindMain, Status: sess.StatusIdle}
	for _, in := range []sess.Info{a, b} {
		if err := s.PutSessionInfo(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	a.Status, a.Result = sess.StatusOK, "done"
	if err := s.PutSessionInfo(ctx, a); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s)
	got, err := s.SessionInfos(ctx)
	if err != nil || len(got) != 2 {
		t.Fatalf("SessionInfos: %v %v", got, err)
	}
	if got[0].Key != b.Key || got[1].Key != a.Key || got[1].Status != sess.StatusOK || got[1].Result != "done" ||
		got[1].Task != a.Task || got[1].Pending[0].Message.Text != "hi" || got[1].LastInbound["c1"] != "m1" {
		t.Fatalf("SessionInfos = %+v", got)
	}
}

func TestWebhooks(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	if _, _, ok, err := s.Webhook(ctx, "c1"); ok || err != nil {
		t.Fatalf("unknown: ok=%v err=%v", ok, err)
	}
	if err := s.PutWebhook(ctx, "c1", "w1", "t1"); err != nil {
		t.Fatal(err)
	}
	if err := s.PutWebhook(ctx, "c1", "w2", "t2"); err != nil {
		t.Fatal(err)
	}
	if err := s.PutWebhook(ctx, "c2", "w3", "t3"); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s)
	if id, tok, ok, err := s.Webhook(ctx, "c1"); err != nil || !ok || id != "w2" || tok != "t2" {
		t.Fatalf("c1 = %q %q %v %v", id, tok, ok, err)
	}
	if err := s.DeleteWebhook(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteWebhook(ctx, "unknown"); err != nil {
		t.Fatal(err)
	}
	if _, _, ok, _ := s.Webhook(ctx, "c1"); ok {
		t.Fatal("deleted webhook still there")
	}
	if id, _, ok, _ := s.Webhook(ctx, "c2"); !ok || id != "w3" {
		t.Fatal("other channel's webhook lost")
	}
}

func TestImportEntries(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	es := []transcript.Entry{
		{Seq: 1, Role: transcript.RoleUser, Text: "a", MessageIDs: []string{"m1"}, Generation: 0},
		{Seq: 2, Role: transcript.RoleAssistant, Text: "b", DeliveryID: "d1", Generation: 1},
	}
	if err := s.ImportEntries(ctx, "k", es); err != nil {
		t.Fatal(err)
	}
	if err := s.ImportEntries(ctx, "k", []transcript.Entry{{Seq: 5}}); err == nil {
		t.Fatal("gap accepted")
	}
	got, err := s.Tail(ctx, "k", 10)
	if err != nil || len(got) != 2 || got[1].Generation != 1 || got[0].MessageIDs[0] != "m1" {
		t.Fatalf("Tail = %+v %v", got, err)
	}
	if _, existed, _ := s.Append(ctx, "k", transcript.Entry{DeliveryID: "d1"}); !existed {
		t.Fatal("imported delivery id not deduped")
	}
	if e, _, _ := s.Append(ctx, "k", transcript.Entry{Text: "c"}); e.Seq != 3 {
		t.Fatalf("seq after import = %d, want 3", e.Seq)
	}
	counts, err := s.Counts(ctx)
	if err != nil || counts["transcript_entries"] != 3 || counts["transcript_messages"] != 1 || counts["bindings"] != 0 {
		t.Fatalf("Counts = %v %v", counts, err)
	}
}

// TestSchemaVersionMatchesMigrations: SchemaVersion is the number of
// migrations (a new migration must bump it).
func TestSchemaVersionMatchesMigrations(t *testing.T) {
	if len(migrations) != SchemaVersion {
		t.Fatalf("SchemaVersion = %d but there are %d migrations", SchemaVersion, len(migrations))
	}
}
