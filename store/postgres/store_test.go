package postgres

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/binding/bindingtest"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/delivery/deliverytest"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/core/transcript/transcripttest"
	"github.com/agentbot/agentbot/scheduler"
	"github.com/agentbot/agentbot/scheduler/schedulertest"
	"github.com/agentbot/agentbot/store/postgres/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func openDSN(t testing.TB, dsn string) *Store {
	t.Helper()
	s, err := Open(context.Background(), dsn, Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

var (
	dsnMu sync.Mutex
	dsnOf = map[*Store]string{} // each store's database, for reopen
)

// openTemp opens a store on a fresh database.
func openTemp(t testing.TB) *Store {
	t.Helper()
	dsn := pgtest.DSN(t)
	s := openDSN(t, dsn)
	dsnMu.Lock()
	dsnOf[s] = dsn
	dsnMu.Unlock()
	return s
}

// reopen closes s and opens a new store on the same database (a restart).
func reopen(t *testing.T, s *Store) *Store {
	t.Helper()
	dsnMu.Lock()
	dsn := dsnOf[s]
	dsnMu.Unlock()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	n := openDSN(t, dsn)
	dsnMu.Lock()
	dsnOf[n] = dsn
	dsnMu.Unlock()
	return n
}

func TestBindingStore(t *testing.T) {
	bindingtest.Run(t,
		func(t *testing.T) binding.Store { return openTemp(t) },
		bindingtest.WithReopen(func(t *testing.T, s binding.Store) binding.Store { return reopen(t, s.(*Store)) }))
}

func TestTranscriptStore(t *testing.T) {
	transcripttest.Run(t,
		func(t *testing.T) transcript.Store { return openTemp(t) },
		transcripttest.WithReopen(func(t *testing.T, s transcript.Store) transcript.Store { return reopen(t, s.(*Store)) }))
}

func TestDeliveryStore(t *testing.T) {
	deliverytest.Run(t,
		func(t *testing.T) delivery.Store { return openTemp(t) },
		deliverytest.WithReopen(func(t *testing.T, s delivery.Store) delivery.Store { return reopen(t, s.(*Store)) }))
}

func TestSchedulerStore(t *testing.T) {
	schedulertest.Run(t,
		func(t *testing.T) scheduler.Store { return openTemp(t) },
		schedulertest.WithReopen(func(t *testing.T, s scheduler.Store) scheduler.Store { return reopen(t, s.(*Store)) }))
}
