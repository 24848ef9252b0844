package delivery_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/sessionkey"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/store/memory"
)

// fakeSender is a hand-written Sender: it "displays" messages per
// conversation, dedupes by delivery id like a nonce, and fails on demand.
type fakeSender struct {
	mu        sync.Mutex
	next      int
	displayed map[string][]string // conversation -> texts
	byID      map[string][]string // delivery id -> message ids
	failNext  error
	sends     int
	// onSend, when set, answers instead of the default behaviour.
	onSend func(d delivery.Delivery) (delivery.Receipt, error)
	got    []delivery.Delivery // every delivery handed to Send
}

func newFakeSender() *fakeSender {
	return &fakeSender{displayed: map[string][]string{}, byID: map[string][]string{}}
}

func (f *fakeSender) Send(_ context.Context, d delivery.Delivery) (delivery.Receipt, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sends++
	f.got = append(f.got, d)
	if f.onSend != nil {
		return f.onSend(d)
	}
	if err := f.failNext; err != nil {
		f.failNext = nil
		return delivery.Receipt{}, err
	}
	if ids, ok := f.byID[d.ID]; ok {
		return delivery.Receipt{MessageIDs: ids, Duplicate: true}, nil
	}
	f.next++
	id := strconv.Itoa(1000 + f.next)
	f.byID[d.ID] = []string{id}
	f.displayed[d.Target.ConversationID] = append(f.displayed[d.Target.ConversationID], d.Text)
	return delivery.Receipt{MessageIDs: []string{id}}, nil
}

// fakeBindings routes conversations through a fixed map and records touches.
type fakeBindings struct {
	mu      sync.Mutex
	bound   map[string]binding.Record
	touched []string
}

func (f *fakeBindings) ResolveByConversation(r binding.ConversationRef) (binding.Record, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.bound[r.Normalize().ConversationID]
	return b, ok
}

func (f *fakeBindings) Touch(id string, _ time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.touched = append(f.touched, id)
}

type fixture struct {
	out      *delivery.Outbound
	sender   *fakeSender
	store    *memory.Store
	tr       *transcript.Service
	bindings *fakeBindings
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newRecoveringFixture(t, nil)
}

// newRecoveringFixture is newFixture whose Outbound hands unfinished
// deliveries of a source to rec's function.
func newRecoveringFixture(t *testing.T, rec map[transcript.Source]delivery.RecoverFunc) *fixture {
	t.Helper()
	st := memory.New()
	clk := clock.NewFake(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	f := &fixture{sender: newFakeSender(), store: st, tr: transcript.New(transcript.Options{}, transcript.Deps{Store: st, Clock: clk}), bindings: &fakeBindings{bound: map[string]binding.Record{}}}
	f.out = delivery.NewOutbound(delivery.OutboundOptions{DefaultAgent: "main"}, delivery.OutboundDeps{Sender: f.sender, Outbox: st, Transcripts: f.tr, Bindings: f.bindings, Clock: clk, Log: zerolog.Nop(), Recover: rec})
	return f
}

func conv(id string) binding.ConversationRef {
	return binding.ConversationRef{Channel: "discord", ConversationID: id}
}

func (f *fixture) entries(t *testing.T, key string) []transcript.Entry {
	t.Helper()
	es, err := f.tr.Entries(context.Background(), key, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func TestOutboundWritesOnceAfterReceipt(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	d := delivery.Delivery{ID: "job:1:run:1", Target: conv("c1"), Text: "result", Producer: delivery.Producer{Source: transcript.SourceJob, AgentID: "main"}}
	res, err := f.out.Deliver(ctx, d, nil)
	if err != nil {
		t.Fatal(err)
	}
	key := sessionkey.ForConversation("main", conv("c1"))
	if !res.Written || res.SessionKey != key {
		t.Fatalf("result %+v, want written to %s", res, key)
	}
	// A retry of the same logical send (e.g. after a crash) neither sends nor writes again.
	if _, err := f.out.Deliver(ctx, d, nil); err != nil {
		t.Fatal(err)
	}
	es := f.entries(t, key)
	if len(es) != 1 || es[0].Text != "result" || es[0].MessageIDs[0] != res.MessageIDs[0] || es[0].Source != transcript.SourceJob || es[0].Role != transcript.RoleAssistant {
		t.Fatalf("entries = %+v", es)
	}
	if f.sender.sends != 1 {
		t.Fatalf("sent %d times, want 1", f.sender.sends)
	}
	rec, _, _ := f.store.GetDelivery(ctx, d.ID)
	if rec.State != delivery.StateDelivered || rec.SessionKey != key {
		t.Fatalf("outbox record %+v", rec)
	}
}

func TestOutboundFailureWritesNothing(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.sender.failNext = fmt.Errorf("unknown channel: %w", delivery.ErrDestinationGone)
	_, err := f.out.Deliver(ctx, delivery.Delivery{ID: "d1", Target: conv("c1"), Text: "x", Producer: delivery.Producer{Source: transcript.SourceAlert}}, nil)
	var fe *delivery.FailedError
	if !errors.As(err, &fe) || !errors.Is(err, delivery.ErrDestinationGone) {
		t.Fatalf("err = %v, want FailedError wrapping ErrDestinationGone", err)
	}
	if es := f.entries(t, sessionkey.ForConversation("main", conv("c1"))); len(es) != 0 {
		t.Fatalf("failed send wrote %+v", es)
	}
	rec, _, _ := f.store.GetDelivery(ctx, "d1")
	if rec.State != delivery.StateFailed || rec.Error == "" {
		t.Fatalf("outbox record %+v, want failed with error", rec)
	}
}

func TestOutboundSkips(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.bindings.bound["t-other"] = binding.Record{ID: "b-other", TargetSessionKey: "agent:research:subagent:9"}
	own := sessionkey.ForConversation("main", conv("c1"))
	tests := []struct {
		name       string
		d          delivery.Delivery
		commit     bool
		wantSkip   string
		wantCommit bool
	}{
		{"turn reply is committed by the turn", delivery.Delivery{ID: "r1", Target: conv("c1"), Text: "hi", Producer: delivery.Producer{Source: transcript.SourceTurn, TurnSessionKey: own, AgentID: "main"}}, true, delivery.SkipTurnReply, true},
		{"other agent's conversation", delivery.Delivery{ID: "r2", Target: conv("t-other"), Text: "hi", Producer: delivery.Producer{Source: transcript.SourceMessageTool, AgentID: "main"}}, false, delivery.SkipOtherAgent, false},
		{"native only", delivery.Delivery{ID: "r3", Target: conv("c2"), Native: true, Producer: delivery.Producer{Source: transcript.SourceJob, AgentID: "main"}}, false, delivery.SkipNativeOnly, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			committed := false
			var commit delivery.CommitFunc
			if tc.commit {
				commit = func(context.Context, delivery.Receipt) error { committed = true; return nil }
			}
			res, err := f.out.Deliver(ctx, tc.d, commit)
			if err != nil {
				t.Fatal(err)
			}
			if res.Written || res.SkipReason != tc.wantSkip || committed != tc.wantCommit {
				t.Fatalf("res %+v committed=%v", res, committed)
			}
		})
	}
	for _, key := range []string{own, "agent:research:subagent:9", sessionkey.ForConversation("main", conv("c2"))} {
		if es := f.entries(t, key); len(es) != 0 {
			t.Errorf("%s got entries %+v", key, es)
		}
	}
}

func TestOutboundRoutesToBoundSessionAndTouches(t *testing.T) {
	f := newFixture(t)
	f.bindings.bound["thread-1"] = binding.Record{ID: "b1", TargetSessionKey: "agent:main:subagent:1"}
	res, err := f.out.Deliver(context.Background(), delivery.Delivery{ID: "announce:1", Target: conv("thread-1"), Text: "done", ViaWebhook: true, Producer: delivery.Producer{Source: transcript.SourceAnnounce, AgentID: "main"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.SessionKey != "agent:main:subagent:1" || len(f.bindings.touched) != 1 || f.bindings.touched[0] != "b1" {
		t.Fatalf("res %+v touched %v", res, f.bindings.touched)
	}
}

func TestOutboundRejectsInvalid(t *testing.T) {
	f := newFixture(t)
	for _, d := range []delivery.Delivery{
		{Target: conv("c"), Text: "x"},
		{ID: "a", Text: "x"},
		{ID: "a", Target: conv("c")},
	} {
		if _, err := f.out.Deliver(context.Background(), d, nil); !errors.Is(err, delivery.ErrInvalidDelivery) {
			t.Errorf("Deliver(%+v) = %v", d, err)
		}
	}
}

func TestOutboundConcurrentSendsKeepDisplayOrder(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := f.out.Deliver(ctx, delivery.Delivery{ID: fmt.Sprintf("d%d", i), Target: conv("c1"), Text: fmt.Sprintf("m%d", i), Producer: delivery.Producer{Source: transcript.SourceJob}}, nil)
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	es := f.entries(t, sessionkey.ForConversation("main", conv("c1")))
	shown := f.sender.displayed["c1"]
	if len(es) != 40 || len(shown) != 40 {
		t.Fatalf("%d entries, %d displayed", len(es), len(shown))
	}
	for i := range es {
		if es[i].Text != shown[i] {
			t.Fatalf("entry %d is %q but display shows %q", i, es[i].Text, shown[i])
		}
	}
}

// interruptingAppender fails once, like a crash between receipt and write.
type interruptingAppender struct {
	delivery.Appender
	fail bool
}

func (a *interruptingAppender) Append(ctx context.Context, key string, e transcript.Entry) (transcript.Entry, error) {
	if a.fail {
		a.fail = false
		return transcript.Entry{}, errors.New("process died")
	}
	return a.Appender.Append(ctx, key, e)
}

func TestRecoverFinishesWithoutDuplicates(t *testing.T) {
	st := memory.New()
	clk := clock.NewFake(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	tr := transcript.New(transcript.Options{}, transcript.Deps{Store: st, Clock: clk})
	sender := newFakeSender()
	app := &interruptingAppender{Appender: tr, fail: true}
	b := &fakeBindings{bound: map[string]binding.Record{}}
	first := delivery.NewOutbound(delivery.OutboundOptions{DefaultAgent: "main"}, delivery.OutboundDeps{Sender: sender, Outbox: st, Transcripts: app, Bindings: b, Clock: clk, Log: zerolog.Nop()})
	ctx := context.Background()
	// Sent but not written (the "crash").
	if _, err := first.Deliver(ctx, delivery.Delivery{ID: "sent-unwritten", Target: conv("c1"), Text: "a", Producer: delivery.Producer{Source: transcript.SourceJob}}, nil); err == nil {
		t.Fatal("expected the interrupted write to fail")
	}
	// Pending: recorded but the process died before the send.
	if err := st.PutDelivery(ctx, delivery.Record{Delivery: delivery.Delivery{ID: "never-sent", Target: conv("c1"), Text: "b", Producer: delivery.Producer{Source: transcript.SourceAlert}}, State: delivery.StatePending, CreatedAt: clk.Now().Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	second := delivery.NewOutbound(delivery.OutboundOptions{DefaultAgent: "main"}, delivery.OutboundDeps{Sender: sender, Outbox: st, Transcripts: tr, Bindings: b, Clock: clk, Log: zerolog.Nop()})
	n, err := second.Recover(ctx, clk.Now().Add(time.Hour))
	if err != nil || n != 2 {
		t.Fatalf("Recover = %d, %v; want 2", n, err)
	}
	if again, _ := second.Recover(ctx, clk.Now().Add(time.Hour)); again != 0 {
		t.Fatalf("second Recover redid %d deliveries", again)
	}
	es, _ := tr.Entries(ctx, sessionkey.ForConversation("main", conv("c1")), 0, 10)
	if len(es) != 2 || es[0].Text != "a" || es[1].Text != "b" {
		t.Fatalf("entries %+v, want a then b once each", es)
	}
	if got := sender.displayed["c1"]; len(got) != 2 {
		t.Fatalf("displayed %v, want 2 messages (no duplicate)", got)
	}
}

func TestRecoverLeavesLiveDeliveriesAlone(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	started := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	live := delivery.Record{Delivery: delivery.Delivery{ID: "live", Target: conv("c1"), Text: "in flight", Producer: delivery.Producer{Source: transcript.SourceJob}},
		State: delivery.StatePending, CreatedAt: started.Add(time.Second)}
	if err := f.store.PutDelivery(ctx, live); err != nil {
		t.Fatal(err)
	}
	n, err := f.out.Recover(ctx, started)
	if err != nil || n != 0 || f.sender.sends != 0 {
		t.Fatalf("Recover took a live delivery: n=%d err=%v sends=%d", n, err, f.sender.sends)
	}
}

// TestTransientFailureStaysPendingForRecover: a transient failure may hide
// a displayed message, so the outbox keeps the delivery pending and the
// next start's Recover finishes it once (here: the "displayed" message is
// found again through the sender's idempotency, like a nonce).
func TestTransientFailureStaysPendingForRecover(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	d := delivery.Delivery{ID: "job:1:run:1", Target: conv("c1"), Text: "result", Producer: delivery.Producer{Source: transcript.SourceJob}}
	// The first attempt "displays" the message but the answer is lost.
	if _, err := f.sender.Send(ctx, d); err != nil {
		t.Fatal(err)
	}
	f.sender.sends = 0
	f.sender.failNext = fmt.Errorf("response dropped: %w", delivery.ErrTransient)
	if _, err := f.out.Deliver(ctx, d, nil); !errors.Is(err, delivery.ErrTransient) {
		t.Fatalf("Deliver = %v, want a transient failure", err)
	}
	rec, _, _ := f.store.GetDelivery(ctx, d.ID)
	if rec.State != delivery.StatePending {
		t.Fatalf("state after a transient failure = %s, want pending", rec.State)
	}
	n, err := f.out.Recover(ctx, rec.CreatedAt.Add(time.Second))
	if err != nil || n != 1 {
		t.Fatalf("Recover = %d, %v", n, err)
	}
	es := f.entries(t, sessionkey.ForConversation("main", conv("c1")))
	if len(es) != 1 || es[0].Meta["recovered"] != "true" || len(f.sender.displayed["c1"]) != 1 {
		t.Fatalf("entries %+v, displayed %v: want the one displayed message written once", es, f.sender.displayed["c1"])
	}
}

// Defect 6 (issue 12): a resend under a pending delivery id sends and
// records the first attempt's text, never the caller's new text.
func TestOutboundResendKeepsFirstAttemptText(t *testing.T) {
	for _, turn := range []bool{false, true} {
		t.Run(fmt.Sprintf("turn=%v", turn), func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			key := sessionkey.ForConversation("main", conv("c1"))
			mk := func(text string) delivery.Delivery {
				d := delivery.Delivery{ID: "turn:1", Target: conv("c1"), Text: text, Producer: delivery.Producer{Source: transcript.SourceTurn, AgentID: "main"}}
				if turn {
					d.Producer.TurnSessionKey = key
				}
				return d
			}
			var committed []string
			commit := func(ctx context.Context, r delivery.Receipt) error {
				if !r.Recovered || r.EntryMeta(nil)["recovered"] != "true" {
					t.Errorf("resent turn reply's receipt %+v is not marked recovered", r)
				}
				committed = append(committed, r.Text)
				_, err := f.tr.Append(ctx, key, transcript.Entry{Role: transcript.RoleAssistant, Text: r.Text, MessageIDs: r.MessageIDs, DeliveryID: "turn:1"})
				return err
			}
			if !turn {
				commit = nil
			}
			// The first attempt was displayed but its response was lost.
			f.sender.failNext = fmt.Errorf("dropped: %w", delivery.ErrTransient)
			if _, err := f.out.Deliver(ctx, mk("first answer"), commit); err == nil {
				t.Fatal("want the transient failure")
			}
			// A re-run of the turn made new text; the same id is sent again.
			if _, err := f.out.Deliver(ctx, mk("second answer"), commit); err != nil {
				t.Fatal(err)
			}
			if got := f.sender.got[1]; got.Text != "first answer" || !got.Resend || !got.FirstAttempt.Equal(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)) {
				t.Fatalf("resend = %+v, want the first text, Resend and FirstAttempt", got)
			}
			es := f.entries(t, key)
			if len(es) != 1 || es[0].Text != "first answer" {
				t.Fatalf("entries = %+v, want the first attempt's text once", es)
			}
			if turn && (len(committed) != 1 || committed[0] != "first answer") {
				t.Fatalf("turn committed %q", committed)
			}
		})
	}
}

// Defect 5 (issue 12): a later part failing permanently records exactly the
// parts displayed and reports the delivery failed; it is never resent.
func TestOutboundPartlyDisplayedRecordsShownParts(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.sender.onSend = func(d delivery.Delivery) (delivery.Receipt, error) {
		return delivery.Receipt{MessageIDs: []string{"m1", "m2"}, Text: "part one part two "}, fmt.Errorf("send part 3/3: thread archived: %w", delivery.ErrDestinationGone)
	}
	d := delivery.Delivery{ID: "long:1", Target: conv("c1"), Text: "part one part two part three", Producer: delivery.Producer{Source: transcript.SourceJob, AgentID: "main"}}
	res, err := f.out.Deliver(ctx, d, nil)
	var fe *delivery.FailedError
	if !errors.As(err, &fe) || !errors.Is(err, delivery.ErrPartlyDisplayed) {
		t.Fatalf("err = %v, want a FailedError wrapping ErrPartlyDisplayed", err)
	}
	key := sessionkey.ForConversation("main", conv("c1"))
	es := f.entries(t, key)
	if len(es) != 1 || es[0].Text != "part one part two " || fmt.Sprint(es[0].MessageIDs) != "[m1 m2]" || !res.Written {
		t.Fatalf("entries = %+v res %+v, want exactly the displayed parts", es, res)
	}
	rec, _, _ := f.store.GetDelivery(ctx, d.ID)
	if rec.State != delivery.StateFailed || rec.Error == "" || len(rec.MessageIDs) != 2 {
		t.Fatalf("record %+v, want failed with the shown ids", rec)
	}
	// Delivering it again neither sends the rest nor writes again.
	if _, err := f.out.Deliver(ctx, d, nil); !errors.Is(err, delivery.ErrPartlyDisplayed) {
		t.Fatalf("repeat err = %v", err)
	}
	if f.sender.sends != 1 || len(f.entries(t, key)) != 1 {
		t.Fatalf("sends %d entries %d", f.sender.sends, len(f.entries(t, key)))
	}
}

// A transient failure after some parts were shown keeps them: the resend
// resumes after them (Shown) instead of relying on the nonce window.
func TestOutboundTransientPartialResumes(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	calls := 0
	f.sender.onSend = func(d delivery.Delivery) (delivery.Receipt, error) {
		calls++
		if calls == 1 {
			return delivery.Receipt{MessageIDs: []string{"m1"}, Text: "a"}, fmt.Errorf("503: %w", delivery.ErrTransient)
		}
		if fmt.Sprint(d.Shown) != "[m1]" {
			return delivery.Receipt{}, fmt.Errorf("resend without shown parts %v: %w", d.Shown, delivery.ErrRejected)
		}
		return delivery.Receipt{MessageIDs: []string{"m1", "m2"}}, nil
	}
	d := delivery.Delivery{ID: "long:2", Target: conv("c1"), Text: "ab", Producer: delivery.Producer{Source: transcript.SourceJob, AgentID: "main"}}
	if _, err := f.out.Deliver(ctx, d, nil); !errors.Is(err, delivery.ErrTransient) {
		t.Fatalf("err = %v", err)
	}
	res, err := f.out.Deliver(ctx, d, nil)
	if err != nil || fmt.Sprint(res.MessageIDs) != "[m1 m2]" {
		t.Fatalf("res %+v err %v", res, err)
	}
}

// A completion from a non-default agent into an unbound channel is
// displayed there, so it is in that channel's transcript: the "bound to a
// different agent" exception needs a binding (invariant 1).
func TestOutboundOtherAgentIntoUnboundChannelIsWritten(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	d := delivery.Delivery{ID: "n1", Target: conv("c-plain"), Text: "⚠️ notice from the researcher",
		Producer: delivery.Producer{Source: transcript.SourceNotice, AgentID: "researcher"}}
	res, err := f.out.Deliver(ctx, d, nil)
	if err != nil {
		t.Fatal(err)
	}
	key := sessionkey.ForConversation("main", conv("c-plain"))
	if !res.Written || res.SkipReason != "" || res.SessionKey != key {
		t.Fatalf("result = %+v, want written to %s", res, key)
	}
	if es := f.entries(t, key); len(es) != 1 || es[0].Text != d.Text {
		t.Fatalf("channel transcript = %+v", es)
	}
}

// Recover hands a producer's unfinished deliveries to its handler (which
// routes afresh and fails closed) instead of resending them as recorded;
// Abandon then finishes the record so it is not taken again.
func TestRecoverHandsDeliveriesToTheirProducer(t *testing.T) {
	var handed []string
	var f *fixture
	f = newRecoveringFixture(t, map[transcript.Source]delivery.RecoverFunc{transcript.SourceAnnounce: func(ctx context.Context, r delivery.Record) (bool, error) {
		handed = append(handed, r.Delivery.ID)
		ok, err := f.out.Abandon(ctx, r.Delivery.ID, "fail-closed: binding-ended")
		if !ok || err != nil {
			t.Errorf("Abandon = %v, %v", ok, err)
		}
		return true, err
	}})
	ctx := context.Background()
	f.sender.failNext = fmt.Errorf("timeout: %w", delivery.ErrTransient)
	d := delivery.Delivery{ID: "announce:x:1", Target: conv("thread-gone"), Text: "result", BindingID: "b1",
		Producer: delivery.Producer{Source: transcript.SourceAnnounce}}
	if _, err := f.out.Deliver(ctx, d, nil); err == nil {
		t.Fatal("want the transient failure")
	}
	sends := f.sender.sends
	for range 2 {
		if _, err := f.out.Recover(ctx, time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
			t.Fatal(err)
		}
	}
	if len(handed) != 1 || f.sender.sends != sends {
		t.Fatalf("handed %v, %d sends; want the delivery handed once and not sent", handed, f.sender.sends-sends)
	}
	r, _, _ := f.store.GetDelivery(ctx, d.ID)
	if r.State != delivery.StateSkipped || r.Reason != "fail-closed: binding-ended" {
		t.Fatalf("record = %+v", r)
	}
}
