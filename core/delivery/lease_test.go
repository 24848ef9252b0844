package delivery_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/store/memory"
)

// Invariant 19: a live message is its owner's while the owner lives,
// however long it lasts; recovery takes it over only once the owner is
// gone, and works from the record as it is under the lock.

// TestRecoverLeavesLiveMessageOfThisProcess: a streamed reply (holding its
// conversation's send lock) and an ACP turn's message (not holding it)
// older than the recovery cutoff are not touched by this process's
// periodic recovery while their pump lives, and finish as their owner
// says (issue 27.1).
func TestRecoverLeavesLiveMessageOfThisProcess(t *testing.T) {
	for _, tt := range []struct {
		name       string
		noSendLock bool
	}{
		{"streamed reply", false},
		{"ACP turn waiting for a permission", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newLiveFixture(t, 2000)
			l := f.out.Live(context.Background(), liveDelivery("turn:1"), delivery.LiveOptions{
				Controls: delivery.Controls{StopRun: "7"}, After: f.after.after, NoSendLock: tt.noSendLock})
			l.Update("Let me look")
			f.sender.waitReqs(t, 1)
			now := f.clk.Advance(10 * time.Minute) // longer than any cutoff

			done := make(chan error, 1)
			go func() {
				n, err := f.out.Recover(context.Background(), now.Add(-2*time.Minute))
				if err == nil && n != 0 {
					err = errors.New("recovered a live message its owner is writing")
				}
				done <- err
			}()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("recovery waits for the live message instead of leaving it to its owner")
			}
			if n := len(f.sender.requests()); n != 1 {
				t.Fatalf("recovery made requests: %+v", f.sender.requests())
			}
			if err := f.after.finishPaced(func() error {
				_, err := l.Finish(context.Background(), "Let me look it up: 42")
				return err
			}, nil); err != nil {
				t.Fatal(err)
			}
			texts, _, controls := f.sender.display()
			if len(texts) != 1 || texts[0] != "Let me look it up: 42" || controls {
				t.Fatalf("display %q (controls %v), want the owner's final text", texts, controls)
			}
			es := f.entries(t)
			if len(es) != 1 || es[0].Text != "Let me look it up: 42" {
				t.Fatalf("entries %+v, want the final text once", es)
			}
		})
	}
}

// listHookStore runs onList once, after the first listing was read and
// before it is returned: what changes between Recover's list and its work.
type listHookStore struct {
	*memory.Store
	once   sync.Once
	onList func()
}

func (s *listHookStore) Deliveries(ctx context.Context, st delivery.PendingState, limit int) ([]delivery.Record, error) {
	recs, err := s.Store.Deliveries(ctx, st, limit)
	if err == nil && len(recs) > 0 {
		s.once.Do(s.onList)
	}
	return recs, err
}

// TestRecoverLiveRereadsUnderTheLock: a live message listed as pending
// and finished by its owner before recovery took the lock is left as its
// owner finished it (recovery once edited it back from the stale copy,
// with "reply interrupted").
func TestRecoverLiveRereadsUnderTheLock(t *testing.T) {
	f := newLiveFixture(t, 2000)
	l := f.live("turn:1")
	l.Update("Hello")
	f.sender.waitReqs(t, 1)
	now := f.clk.Advance(10 * time.Minute)
	// Another process over the same outbox (its recovery at start).
	other := delivery.NewOutbound(delivery.OutboundOptions{DefaultAgent: "main"}, delivery.OutboundDeps{
		Sender: f.sender, Transcripts: f.tr, Bindings: &fakeBindings{}, Clock: f.clk, Log: zerolog.Nop(),
		Outbox: &listHookStore{Store: f.store, onList: func() {
			if err := f.after.finishPaced(func() error {
				_, err := l.Finish(context.Background(), "Hello world")
				return err
			}, nil); err != nil {
				t.Error(err)
			}
		}}})
	n, err := other.Recover(context.Background(), now)
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("recovered %d, want 0 (finished meanwhile)", n)
	}
	texts, _, controls := f.sender.display()
	if len(texts) != 1 || texts[0] != "Hello world" || controls {
		t.Fatalf("display %q (controls %v), want the finished text", texts, controls)
	}
	r, _, _ := f.store.GetDelivery(context.Background(), "turn:1")
	if r.State != delivery.StateDelivered || r.Delivery.Text != "Hello world" {
		t.Fatalf("record %s %q, want delivered with the finished text", r.State, r.Delivery.Text)
	}
}

// countingClaims is fakeClaims that reports each successful claim.
type countingClaims struct {
	*fakeClaims
	claimed chan string
}

func (c *countingClaims) ClaimDelivery(ctx context.Context, id, owner string, lease time.Duration) (bool, error) {
	ok, err := c.fakeClaims.ClaimDelivery(ctx, id, owner, lease)
	if ok {
		select {
		case c.claimed <- owner:
		default:
		}
	}
	return ok, err
}

// TestLiveLeaseRenewedWhileIdleThenTakenOver: with several processes, the
// pump renews its claim while the message lives, even when it sends
// nothing for minutes (an ACP agent waiting for a permission), so another
// process's recovery leaves it alone; once the owner is gone (its pump
// hung in a request: the process died there) and the lease ran out, the
// other process takes it over and finishes it (issue 27.1).
func TestLiveLeaseRenewedWhileIdleThenTakenOver(t *testing.T) {
	f := newLiveFixture(t, 2000)
	claims := &countingClaims{fakeClaims: &fakeClaims{clk: f.clk, store: f.store, owner: map[string]string{}, until: map[string]time.Time{}},
		claimed: make(chan string, 1)}
	const lease = time.Minute
	process := func(owner string) *delivery.Outbound {
		return delivery.NewOutbound(delivery.OutboundOptions{DefaultAgent: "main", Owner: owner, Lease: lease},
			delivery.OutboundDeps{Sender: f.sender, Outbox: f.store, Transcripts: f.tr, Bindings: &fakeBindings{},
				Clock: f.clk, Log: zerolog.Nop(), Claimer: claims})
	}
	a, b := process("a"), process("b")
	l := a.Live(context.Background(), liveDelivery("acp:1"), delivery.LiveOptions{
		Controls: delivery.Controls{StopRun: "7"}, After: f.after.after, NoSendLock: true})
	l.Update("May I run `make`?")
	f.sender.waitReqs(t, 1)
	waitClaim := func() {
		t.Helper()
		select {
		case <-claims.claimed:
		case <-time.After(10 * time.Second):
			t.Fatalf("the idle pump did not renew its claim (now %v, %+v)", f.clk.Now(), claims.until)
		}
	}
	waitClaim() // the first claim, at start
	for range 15 {
		// Five minutes without a request: the pump renews every lease/3.
		f.after.waitPending(t)
		f.after.fire(lease / 3)
		waitClaim()
		n, err := b.Recover(context.Background(), f.clk.Now().Add(-lease))
		if err != nil || n != 0 {
			t.Fatalf("other process recovered %d (%v) while the owner lives", n, err)
		}
	}
	if n := len(f.sender.requests()); n != 1 {
		t.Fatalf("requests while the owner lives: %+v", f.sender.requests())
	}

	// The owner dies in its next request.
	f.sender.mu.Lock()
	f.sender.hang = func(r liveReq) bool { return !r.post && !strings.HasSuffix(r.text, delivery.InterruptedMark) }
	f.sender.mu.Unlock()
	l.Update("May I run `make`? Approved.")
	f.sender.waitReqs(t, 2)
	f.clk.Advance(2 * lease)
	n, err := b.Recover(context.Background(), f.clk.Now().Add(-lease))
	if err != nil || n != 1 {
		t.Fatalf("recovered %d (%v), want the dead owner's message taken over", n, err)
	}
	texts, _, controls := f.sender.display()
	want := "May I run `make`? Approved." + delivery.InterruptedMark
	if len(texts) != 1 || texts[0] != want || controls {
		t.Fatalf("display %q (controls %v), want %q", texts, controls, want)
	}
	es := f.entries(t)
	if len(es) != 1 || es[0].Text != want {
		t.Fatalf("entries %+v, want %q once", es, want)
	}
}

// pausingSender pauses its first send as a rate limit does (Pause: the
// conversation's lock released) until resume is closed, then posts.
type pausingSender struct {
	*fakeSender
	paused chan struct{}
	resume context.Context
	first  sync.Once
}

func (p *pausingSender) Send(ctx context.Context, d delivery.Delivery) (delivery.Receipt, error) {
	pause := false
	p.first.Do(func() { pause = true })
	if pause {
		close(p.paused)
		pctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			<-p.resume.Done()
			cancel()
		}()
		_ = delivery.Pause(pctx, time.Hour) // ended by resume, not by the hour
	}
	// A webhook has no nonce: every post displays a message.
	p.fakeSender.mu.Lock()
	defer p.fakeSender.mu.Unlock()
	p.fakeSender.next++
	id := "w" + strings.Repeat("1", p.fakeSender.next)
	p.fakeSender.displayed[d.Target.ConversationID] = append(p.fakeSender.displayed[d.Target.ConversationID], d.Text)
	return delivery.Receipt{MessageIDs: []string{id}}, nil
}

// TestRecoverLeavesDeliveryPausedByRateLimit: a webhook delivery paused
// by a rate limit past the recovery cutoff is not sent again by the
// periodic recovery (a webhook has no nonce: it was displayed twice).
func TestRecoverLeavesDeliveryPausedByRateLimit(t *testing.T) {
	f := newFixture(t)
	resume, cancel := context.WithCancel(context.Background())
	s := &pausingSender{fakeSender: f.sender, paused: make(chan struct{}), resume: resume}
	clk := clock.NewFake(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	out := delivery.NewOutbound(delivery.OutboundOptions{DefaultAgent: "main"}, delivery.OutboundDeps{Sender: s, Outbox: f.store,
		Transcripts: f.tr, Bindings: f.bindings, Clock: clk, Log: zerolog.Nop()})
	d := delivery.Delivery{ID: "job:1:run:1", Target: conv("c1"), Text: "report", ViaWebhook: true,
		Persona: delivery.Persona{Name: "Reporter"}, Producer: delivery.Producer{Source: transcript.SourceJob, AgentID: "main"}}
	done := make(chan error, 1)
	go func() {
		_, err := out.Deliver(context.Background(), d, nil)
		done <- err
	}()
	<-s.paused
	now := clk.Advance(3 * time.Minute)
	rec := make(chan error, 1)
	go func() {
		_, err := out.Recover(context.Background(), now.Add(-2*time.Minute))
		rec <- err
	}()
	select {
	case err := <-rec:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("recovery blocked")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := f.sender.displayed["c1"]; len(got) != 1 {
		t.Fatalf("displayed %q, want the report once", got)
	}
}

// failReadStore fails GetDelivery (the outbox unreadable) and records
// every PutDelivery.
type failReadStore struct {
	*memory.Store
	mu   sync.Mutex
	puts []delivery.Record
}

func (s *failReadStore) GetDelivery(context.Context, string) (delivery.Record, bool, error) {
	return delivery.Record{}, false, errors.New("store unreachable")
}

func (s *failReadStore) PutDelivery(ctx context.Context, r delivery.Record) error {
	s.mu.Lock()
	s.puts = append(s.puts, r)
	s.mu.Unlock()
	return s.Store.PutDelivery(ctx, r)
}

// TestLiveStartReadFailureWritesNothing: when the outbox cannot be read
// at a live message's start, nothing is displayed, no record is written
// (it once wrote an empty record, refused by the store, and counted it as
// a failed delivery), and Finish reports the failure (suspected in issue
// 27).
func TestLiveStartReadFailureWritesNothing(t *testing.T) {
	f := newLiveFixture(t, 2000)
	st := &failReadStore{Store: f.store}
	var observed []delivery.Record
	out := delivery.NewOutbound(delivery.OutboundOptions{DefaultAgent: "main"}, delivery.OutboundDeps{Sender: f.sender, Outbox: st,
		Transcripts: f.tr, Bindings: &fakeBindings{}, Clock: f.clk, Log: zerolog.Nop(),
		Observe: func(r delivery.Record) { observed = append(observed, r) }})
	l := out.Live(context.Background(), liveDelivery("turn:1"), delivery.LiveOptions{After: f.after.after})
	l.Update("Hello")
	_, err := l.Finish(context.Background(), "Hello world")
	var fe *delivery.FailedError
	if !errors.As(err, &fe) {
		t.Fatalf("Finish: %v, want a failed delivery", err)
	}
	if n := len(f.sender.requests()); n != 0 {
		t.Fatalf("requests %+v, want none", f.sender.requests())
	}
	if len(st.puts) != 0 || len(observed) != 0 {
		t.Fatalf("records written %+v, observed %+v; want none", st.puts, observed)
	}
}
