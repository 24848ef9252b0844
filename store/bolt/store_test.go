package bolt

import (
	"path/filepath"
	"testing"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/binding/bindingtest"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/delivery/deliverytest"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/core/transcript/transcripttest"
)

func openTemp(t testing.TB) *Store {
	t.Helper()
	return openAt(t, filepath.Join(t.TempDir(), "data", "bot.db"))
}

func openAt(t testing.TB, path string) *Store {
	t.Helper()
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func reopen(t *testing.T, s *Store) *Store {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return openAt(t, s.Path())
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
