package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/store"
	"github.com/agentbot/agentbot/store/postgres/pgtest"
)

// instantAfter is a RetryOptions.After that fires at once and records the
// waits asked for.
func instantAfter(waits *[]time.Duration) func(time.Duration) <-chan time.Time {
	return func(d time.Duration) <-chan time.Time {
		*waits = append(*waits, d)
		c := make(chan time.Time, 1)
		c <- time.Time{}
		return c
	}
}

var (
	errRefused  = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	errShutdown = &pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"}
	errSyntax   = &pgconn.PgError{Code: "42601", Message: "syntax error"}
)

func TestTransient(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"refused", fmt.Errorf("wrapped: %w", errRefused), true},
		{"reset", syscall.ECONNRESET, true},
		{"unexpected EOF", io.ErrUnexpectedEOF, true},
		{"admin shutdown", errShutdown, true},
		{"starting up", &pgconn.PgError{Code: "57P03"}, true},
		{"connection exception", &pgconn.PgError{Code: "08006"}, true},
		{"too many connections", &pgconn.PgError{Code: "53300"}, true},
		{"serialization", &pgconn.PgError{Code: "40001"}, true},
		{"conn closed", pgconn.ErrConnClosed, true},
		{"bad statement", errSyntax, false},
		{"login refused", &pgconn.PgError{Code: "28P01"}, false},
		{"cancelled", context.Canceled, false},
		{"plain", errors.New("decode record"), false},
	} {
		if got := Transient(tc.err); got != tc.want {
			t.Errorf("%s: Transient = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestDoRetriesTransientFailures: the one retry loop every store call
// goes through waits with doubling backoff while the database is away,
// replays only what may be replayed, and then fails with
// store.ErrUnavailable.
func TestDoRetriesTransientFailures(t *testing.T) {
	lostCommit := errShutdown          // may arrive after a COMMIT was applied
	beforeCommit := rolledBack{io.EOF} // inTx: failed before COMMIT
	for _, tc := range []struct {
		name        string
		eff         effect
		errs        []error // the attempts' results; past the end: nil
		budget      time.Duration
		wantCalls   int
		wantWaits   []time.Duration
		unavailable bool
		ok          bool
	}{
		{name: "back after three failures", eff: idempotent, errs: []error{errRefused, errRefused, errShutdown},
			wantCalls: 4, wantWaits: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}, ok: true},
		{name: "read", eff: readOnly, errs: []error{io.ErrUnexpectedEOF}, wantCalls: 2,
			wantWaits: []time.Duration{100 * time.Millisecond}, ok: true},
		{name: "not transient: at once", eff: idempotent, errs: []error{errSyntax}, wantCalls: 1},
		{name: "budget spent", eff: idempotent, budget: 700 * time.Millisecond,
			errs: []error{errRefused, errRefused, errRefused, errRefused, errRefused}, wantCalls: 4,
			wantWaits: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}, unavailable: true},
		{name: "waits capped at Max", eff: readOnly,
			errs:      []error{errRefused, errRefused, errRefused, errRefused, errRefused, errRefused, errRefused, errRefused},
			wantCalls: 9, wantWaits: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond,
				800 * time.Millisecond, 1600 * time.Millisecond, 2 * time.Second, 2 * time.Second, 2 * time.Second}, ok: true},
		{name: "once: lost commit not replayed", eff: once, errs: []error{lostCommit}, wantCalls: 1, unavailable: true},
		{name: "once: failed before commit replayed", eff: once, errs: []error{beforeCommit}, wantCalls: 2,
			wantWaits: []time.Duration{100 * time.Millisecond}, ok: true},
		{name: "once: refused connect replayed", eff: once, errs: []error{&pgconn.ConnectError{Config: &pgconn.Config{}}, errRefused}, wantCalls: 2,
			wantWaits: []time.Duration{100 * time.Millisecond}, unavailable: true},
		{name: "no retry", eff: readOnly, budget: -1, errs: []error{errRefused}, wantCalls: 1, unavailable: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var waits []time.Duration
			budget := tc.budget
			if budget == 0 {
				budget = time.Minute
			}
			s := &Store{retry: RetryOptions{Budget: budget, Max: 2 * time.Second, After: instantAfter(&waits)}.withDefaults()}
			calls := 0
			err := s.do(context.Background(), "op", tc.eff, func(context.Context) error {
				calls++
				if calls <= len(tc.errs) {
					return tc.errs[calls-1]
				}
				return nil
			})
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok=%v", err, tc.ok)
			}
			if errors.Is(err, store.ErrUnavailable) != tc.unavailable {
				t.Errorf("err = %v, want ErrUnavailable=%v", err, tc.unavailable)
			}
			if calls != tc.wantCalls {
				t.Errorf("calls = %d, want %d", calls, tc.wantCalls)
			}
			if fmt.Sprint(waits) != fmt.Sprint(tc.wantWaits) {
				t.Errorf("waits = %v, want %v", waits, tc.wantWaits)
			}
		})
	}
}

// TestDoStopsWaitingWhenTheContextEnds: a caller that gives up is not
// held for the rest of the budget.
func TestDoStopsWaitingWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Store{retry: RetryOptions{After: func(time.Duration) <-chan time.Time { cancel(); return nil }}.withDefaults()}
	err := s.do(ctx, "op", readOnly, func(context.Context) error { return errRefused })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// TestStoreSurvivesADatabaseRestart restarts a real PostgreSQL server
// under an open store: calls made while it is down wait (bounded backoff)
// and succeed once it is back, reads and writes alike; nothing is lost or
// written twice. On the old code every call failed at once.
func TestStoreSurvivesADatabaseRestart(t *testing.T) {
	srv := pgtest.NewServer(t)
	dsn := srv.DSN(t)
	failed := make(chan string, 100)
	s, err := Open(context.Background(), dsn, Options{Retry: RetryOptions{
		First: 20 * time.Millisecond, Max: 200 * time.Millisecond,
		OnRetry: func(op string, _ int, _ error) {
			select {
			case failed <- op:
			default:
			}
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	entry := func(i int) transcript.Entry {
		return transcript.Entry{Role: transcript.RoleAssistant, Text: fmt.Sprint("m", i), DeliveryID: fmt.Sprint("d", i), MessageIDs: []string{fmt.Sprint(i)}}
	}
	if _, _, err := s.Append(ctx, "k", entry(1)); err != nil {
		t.Fatal(err)
	}

	srv.Stop() // the pool's connections are all dead now, new ones refused
	type result struct {
		e   transcript.Entry
		err error
	}
	appended := make(chan result, 1)
	go func() {
		e, _, err := s.Append(ctx, "k", entry(2))
		appended <- result{e, err}
	}()
	select { // the call is waiting for the database, not failed
	case <-failed:
	case r := <-appended:
		t.Fatalf("Append while the database is down returned at once: %+v %v", r.e, r.err)
	case <-ctx.Done():
		t.Fatal("no retry reported")
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	r := <-appended
	if r.err != nil {
		t.Fatalf("Append across the restart: %v", r.err)
	}
	if r.e.Seq != 2 {
		t.Fatalf("appended seq = %d, want 2", r.e.Seq)
	}
	// A replay of the same delivery (its first answer lost) is not written twice.
	if _, existed, err := s.Append(ctx, "k", entry(2)); err != nil || !existed {
		t.Fatalf("replay: existed=%v err=%v", existed, err)
	}
	es, err := s.Tail(ctx, "k", 10)
	if err != nil || len(es) != 2 {
		t.Fatalf("tail = %+v, %v; want 2 entries", es, err)
	}

	// A second outage, this time for a read.
	srv.Stop()
	got := make(chan error, 1)
	go func() { _, err := s.Tail(ctx, "k", 10); got <- err }()
	select {
	case <-failed:
	case err := <-got:
		t.Fatalf("Tail while the database is down returned at once: %v", err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("Tail across the restart: %v", err)
	}
}

// TestStoreGivesUpWithErrUnavailable: past the budget a call fails with
// store.ErrUnavailable, so callers can tell an outage from a bad call.
func TestStoreGivesUpWithErrUnavailable(t *testing.T) {
	srv := pgtest.NewServer(t)
	dsn := srv.DSN(t)
	var waits []time.Duration
	s, err := Open(context.Background(), dsn, Options{Retry: RetryOptions{Budget: time.Second, After: instantAfter(&waits)}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	srv.Stop()
	_, _, err = s.GetDelivery(context.Background(), "d1")
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("err = %v, want store.ErrUnavailable", err)
	}
	if len(waits) == 0 {
		t.Fatal("gave up without waiting")
	}
}

// TestClaimInstantReplayWinsAgain: a ClaimInstant replayed after a lost
// COMMIT (same call, same claim token) still wins its instant, while any
// other claim of that instant loses. Before the token, the replay lost
// and the scheduler skipped a run it had claimed.
func TestClaimInstantReplayWinsAgain(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	for i, tc := range []struct {
		token string
		want  bool
	}{{"a", true}, {"a", true}, {"b", false}, {"a", true}} {
		got, err := s.claimInstant(ctx, "job1", at, tc.token)
		if err != nil || got != tc.want {
			t.Fatalf("claim %d (token %s) = %v, %v; want %v", i, tc.token, got, err, tc.want)
		}
	}
	if ok, err := s.ClaimInstant(ctx, "job1", at); err != nil || ok {
		t.Fatalf("a new claim of a claimed instant = %v, %v; want false", ok, err)
	}
	if ok, err := s.ClaimInstant(ctx, "job1", at.Add(time.Minute)); err != nil || !ok {
		t.Fatalf("a later instant = %v, %v; want true", ok, err)
	}
}
