package postgres

import (
	"context"
	"sync"
	"testing"

	"github.com/agentbot/agentbot/core/transcript"
)

// racingStore is process A's store; before its first write (Append) or
// after its first generation read it lets process B run a /reset, the
// interleaving two shards produce.
type racingStore struct {
	*Store
	once  sync.Once
	other func()
}

func (r *racingStore) Append(ctx context.Context, key string, e transcript.Entry) (transcript.Entry, bool, error) {
	r.once.Do(r.other)
	return r.Store.Append(ctx, key, e)
}

func (r *racingStore) Generation(ctx context.Context, key string) (int, error) {
	g, err := r.Store.Generation(ctx, key)
	r.once.Do(r.other)
	return g, err
}

// TestResetOrderedAcrossProcesses: on PostgreSQL, /reset is ordered against
// every other process's Appends and resets by the database, not by one
// process's lock. A message appended by process A after process B's reset
// belongs to the new generation (the model sees it), and two resets in two
// processes start two generations. On the old code A stamped the entry with
// the generation it had read before B's reset (the message vanished from
// the model's history) and both resets returned generation 1.
func TestResetOrderedAcrossProcesses(t *testing.T) {
	ctx := context.Background()
	const key = "agent:main:discord:channel:1"
	t.Run("append after another process's reset", func(t *testing.T) {
		a, b := twoProcesses(t)
		tb := transcript.New(transcript.Options{}, transcript.Deps{Store: b})
		ra := &racingStore{Store: a, other: func() {
			if _, err := tb.Reset(ctx, key); err != nil {
				t.Error(err)
			}
		}}
		ta := transcript.New(transcript.Options{}, transcript.Deps{Store: ra})
		if _, err := ta.Append(ctx, key, transcript.Entry{Role: transcript.RoleUser, Text: "after the reset",
			DeliveryID: "in:2", MessageIDs: []string{"2"}}); err != nil {
			t.Fatal(err)
		}
		h, err := tb.History(ctx, key, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(h) != 1 || h[0].Text != "after the reset" {
			t.Fatalf("history after the reset = %+v, want the message appended after it", h)
		}
	})
	t.Run("two resets", func(t *testing.T) {
		a, b := twoProcesses(t)
		tb := transcript.New(transcript.Options{}, transcript.Deps{Store: b})
		var genB int
		ra := &racingStore{Store: a, other: func() {
			var err error
			if genB, err = tb.Reset(ctx, key); err != nil {
				t.Error(err)
			}
		}}
		ta := transcript.New(transcript.Options{}, transcript.Deps{Store: ra})
		genA, err := ta.Reset(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if genB == 0 { // the new code never reads before it resets
			if genB, err = tb.Reset(ctx, key); err != nil {
				t.Fatal(err)
			}
		}
		if genA == genB {
			t.Fatalf("two resets both returned generation %d", genA)
		}
		if g, _ := b.Generation(ctx, key); g != 2 {
			t.Fatalf("generation after two resets = %d, want 2", g)
		}
	})
}
