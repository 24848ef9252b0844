package bolt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/agentbot/agentbot/core/delivery"
	sess "github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/core/transcript"
)

func TestOpenModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "nested")
	path := filepath.Join(dir, "bot.db")
	s := openAt(t, path)
	if s.Path() != path {
		t.Fatalf("Path() = %q, want %q", s.Path(), path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Fatalf("file mode = %o, want 600", got)
	}
	di, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := di.Mode().Perm(); got&0o077 != 0 {
		t.Fatalf("dir mode = %o, want no group/other access", got)
	}
}

func TestOpenTightensExistingFileMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bot.db")
	s := openAt(t, path)
	s.Close()
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	openAt(t, path)
	fi, _ := os.Stat(path)
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Fatalf("file mode after reopen = %o, want 600", got)
	}
}

func TestSecondOpenIsLocked(t *testing.T) {
	s := openTemp(t)
	start := time.Now()
	_, err := Open(s.Path(), Options{LockTimeout: 100 * time.Millisecond})
	if err == nil {
		t.Fatal("second Open of a held store succeeded")
	}
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("error %v does not wrap ErrLocked", err)
	}
	if want := "store " + s.Path() + " is locked by another bot process"; err.Error() != want {
		t.Fatalf("error text = %q, want %q", err.Error(), want)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("lock timeout took %v", d)
	}
	// Once released, the file opens again.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(s.Path(), Options{LockTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	s2.Close()
}

func TestCloseTwice(t *testing.T) {
	s := openTemp(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func readVersion(t *testing.T, path string) uint64 {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v uint64
	db.View(func(tx *bbolt.Tx) error { v = schemaVersion(tx); return nil })
	return v
}

func TestSchemaVersionWritten(t *testing.T) {
	s := openTemp(t)
	s.Close()
	if v := readVersion(t, s.Path()); v != SchemaVersion {
		t.Fatalf("schema version = %d, want %d", v, SchemaVersion)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	s := openTemp(t)
	s.Close()
	db, err := bbolt.Open(s.Path(), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keySchemaVersion, u64(SchemaVersion+1))
	})
	db.Close()

	_, err = Open(s.Path(), Options{})
	if !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("Open of a newer store: err = %v, want ErrSchemaTooNew", err)
	}
	for _, want := range []string{s.Path(), fmt.Sprintf("schema version %d", SchemaVersion+1), fmt.Sprintf("supports up to %d", SchemaVersion), "upgrade"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not mention %q", err, want)
		}
	}
	// The refused open released the lock and left the version alone.
	if v := readVersion(t, s.Path()); v != SchemaVersion+1 {
		t.Fatalf("version after refused open = %d", v)
	}
}

func TestMigrationsRunOnceInOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bot.db")
	var ran []string
	mig := func(name string) migration {
		return migration{name: name, fn: func(tx *bbolt.Tx) error {
			ran = append(ran, name)
			_, err := tx.CreateBucketIfNotExists([]byte("mig-" + name))
			return err
		}}
	}
	v1 := append(append([]migration{}, migrations...), mig("a"))
	for range 3 {
		s, err := open(path, Options{}, v1)
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	if strings.Join(ran, ",") != "a" {
		t.Fatalf("migrations ran %q, want a once", ran)
	}
	v2 := append(append([]migration{}, v1...), mig("b"), mig("c"))
	for range 2 {
		s, err := open(path, Options{}, v2)
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	if strings.Join(ran, ",") != "a,b,c" {
		t.Fatalf("migrations ran %q, want a,b,c", ran)
	}
	if v := readVersion(t, path); v != uint64(len(v2)) {
		t.Fatalf("version = %d, want %d", v, len(v2))
	}
	// The current binary (fewer migrations) now refuses the file.
	if _, err := Open(path, Options{}); !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("err = %v, want ErrSchemaTooNew", err)
	}
}

func TestFailedMigrationRollsBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bot.db")
	boom := errors.New("boom")
	migs := append(append([]migration{}, migrations...),
		migration{name: "creates", fn: func(tx *bbolt.Tx) error {
			_, err := tx.CreateBucket([]byte("half"))
			return err
		}},
		migration{name: "fails", fn: func(*bbolt.Tx) error { return boom }})
	if _, err := open(path, Options{}, migs); !errors.Is(err, boom) || !strings.Contains(err.Error(), fmt.Sprintf("migration %d (fails)", len(migrations)+2)) {
		t.Fatalf("err = %v", err)
	}
	if v := readVersion(t, path); v != 0 {
		t.Fatalf("version after failed migration = %d, want 0", v)
	}
	s := openAt(t, path) // current migrations still apply cleanly
	s.Close()
}

func TestAppendBatchDedupesWithinOneBatch(t *testing.T) {
	// A long batch delay makes concurrent appends of one delivery id land in
	// the same transaction; only one may be written.
	s, err := Open(filepath.Join(t.TempDir(), "bot.db"), Options{MaxBatchDelay: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	type res struct {
		e       transcript.Entry
		existed bool
	}
	results := make(chan res, 8)
	for range 8 {
		go func() {
			e, existed, err := s.Append(ctx, "k", transcript.Entry{Text: "x", DeliveryID: "same"})
			if err != nil {
				t.Error(err)
			}
			results <- res{e, existed}
		}()
	}
	created := 0
	for range 8 {
		r := <-results
		if !r.existed {
			created++
		}
		if r.e.Seq != 1 {
			t.Fatalf("seq = %d, want 1", r.e.Seq)
		}
	}
	if created != 1 {
		t.Fatalf("%d appends created the entry, want 1", created)
	}
	es, _ := s.Tail(ctx, "k", 10)
	if len(es) != 1 {
		t.Fatalf("%d entries, want 1", len(es))
	}
}

// TestSchemaVersionMatchesMigrations: SchemaVersion is the number of
// migrations (a new migration must bump it).
func TestSchemaVersionMatchesMigrations(t *testing.T) {
	if len(migrations) != SchemaVersion {
		t.Fatalf("SchemaVersion = %d but there are %d migrations", SchemaVersion, len(migrations))
	}
}

// TestDeliveryAndSessionWritesGroupCommit: concurrent PutDelivery and
// PutSessionInfo calls share transactions (one fsync per batch), as Append
// does; one transaction each queued every conversation behind bbolt's one
// writer (the load harness's top cost). Counted in transactions, not time:
// bbolt's txid grows by one per commit.
func TestDeliveryAndSessionWritesGroupCommit(t *testing.T) {
	const n = 32
	// A batch commits when full (n) or after the delay: with the delay far
	// longer than starting n goroutines, all n join one batch.
	s, err := Open(filepath.Join(t.TempDir(), "bot.db"), Options{MaxBatchDelay: 200 * time.Millisecond, MaxBatchSize: n})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	txid := func() int {
		var id int
		if err := s.db.View(func(tx *bbolt.Tx) error { id = tx.ID(); return nil }); err != nil {
			t.Fatal(err)
		}
		return id
	}
	for _, tc := range []struct {
		name  string
		write func(i int) error
	}{
		{"PutDelivery", func(i int) error {
			return s.PutDelivery(ctx, delivery.Record{Delivery: delivery.Delivery{ID: fmt.Sprintf("d%d", i), Text: "x"}, State: delivery.StatePending, CreatedAt: time.Unix(int64(i), 0)})
		}},
		{"PutSessionInfo", func(i int) error {
			return s.PutSessionInfo(ctx, sess.Info{Key: fmt.Sprintf("agent:main:discord:channel:%d", i)})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := txid()
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					if err := tc.write(i); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			if commits := txid() - before; commits >= n/2 {
				t.Fatalf("%d concurrent writes took %d commits, want them grouped (fewer than %d)", n, commits, n/2)
			}
		})
	}
	recs, err := s.Deliveries(ctx, "", 0)
	if err != nil || len(recs) != n {
		t.Fatalf("%d deliveries (%v), want %d", len(recs), err, n)
	}
}
