package delivery_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/platform"
	"github.com/agentbot/agentbot/core/sessionkey"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/store/memory"
)

var (
	mxRoom   = binding.ConversationRef{Channel: "matrix", ConversationID: "!abc:example.org"}
	mxThread = binding.ConversationRef{Channel: "matrix", ConversationID: "$root", ParentConversationID: "!abc:example.org"}
)

type muxFixture struct {
	out   *delivery.Outbound
	store *memory.Store
	tr    *transcript.Service
	clk   *clock.Fake
	after *manualAfter
}

// senderTable is the platform table of one sender per platform name.
func senderTable(senders map[string]delivery.Sender) *platform.Table {
	var ps []platform.Platform
	for name, s := range senders {
		ps = append(ps, platform.Platform{Name: name, Sender: s})
	}
	return platform.New(ps...)
}

func newMuxFixture(t *testing.T, senders map[string]delivery.Sender) *muxFixture {
	t.Helper()
	st := memory.New()
	clk := clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	f := &muxFixture{store: st, tr: transcript.New(transcript.Options{}, transcript.Deps{Store: st, Clock: clk}), clk: clk, after: &manualAfter{clk: clk, registered: make(chan struct{}, 1)}}
	f.out = f.outbound(senderTable(senders))
	return f
}

func (f *muxFixture) outbound(s delivery.Sender) *delivery.Outbound {
	return delivery.NewOutbound(delivery.OutboundOptions{DefaultAgent: "main"}, delivery.OutboundDeps{Sender: s, Outbox: f.store, Transcripts: f.tr,
		Bindings: &fakeBindings{bound: map[string]binding.Record{}}, Clock: f.clk, Log: zerolog.Nop()})
}

func (f *muxFixture) entries(t *testing.T, conv binding.ConversationRef) []transcript.Entry {
	t.Helper()
	es, err := f.tr.Entries(context.Background(), sessionkey.ForConversation("main", conv), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func job(id string, to binding.ConversationRef, text string) delivery.Delivery {
	return delivery.Delivery{ID: id, Target: to, Text: text, Producer: delivery.Producer{Source: transcript.SourceJob, AgentID: "main"}}
}

// TestMuxDispatchesByPlatform: each delivery is displayed by the sender of
// its target's platform only, and its entry lands in that conversation's
// own session with that sender's message ids (Rule 1).
func TestMuxDispatchesByPlatform(t *testing.T) {
	dc, mx := newFakeSender(), newFakeSender()
	mx.next = 100 // distinct message ids
	f := newMuxFixture(t, map[string]delivery.Sender{"discord": dc, "Matrix": mx})
	ctx := context.Background()
	tests := []struct {
		d      delivery.Delivery
		sender *fakeSender
		other  *fakeSender
	}{
		{job("d1", conv("c1"), "to discord"), dc, mx},
		{job("d2", mxRoom, "to the room"), mx, dc},
		{job("d3", binding.ConversationRef{Channel: " MATRIX ", ConversationID: "$root", ParentConversationID: "!abc:example.org"}, "to the thread"), mx, dc},
	}
	for _, tc := range tests {
		before := tc.other.sends
		res, err := f.out.Deliver(ctx, tc.d, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.d.ID, err)
		}
		got := tc.sender.got[len(tc.sender.got)-1]
		if got.ID != tc.d.ID || got.Target != tc.d.Target.Normalize() || tc.other.sends != before {
			t.Fatalf("%s: displayed %+v; other sender's sends %d -> %d", tc.d.ID, got, before, tc.other.sends)
		}
		es := f.entries(t, tc.d.Target)
		if len(es) != 1 || es[0].Text != tc.d.Text || strings.Join(es[0].MessageIDs, ",") != strings.Join(tc.sender.byID[tc.d.ID], ",") ||
			!res.Written || res.SessionKey != sessionkey.ForConversation("main", tc.d.Target) {
			t.Fatalf("%s: result %+v, entries %+v", tc.d.ID, res, es)
		}
	}
	if k := sessionkey.ForConversation("main", mxThread); k != "agent:main:matrix:channel:!abc:example.org/$root" {
		t.Fatalf("thread key %q", k)
	}
}

// TestMuxUnknownPlatformFailsPermanently: a delivery to a platform this
// process has no sender for is refused with a text naming it and the
// platforms it has; nothing is displayed or written, and it is failed
// (Recover does not try it again).
func TestMuxUnknownPlatformFailsPermanently(t *testing.T) {
	dc, mx := newFakeSender(), newFakeSender()
	f := newMuxFixture(t, map[string]delivery.Sender{"discord": dc, "matrix": mx, "irc": nil})
	ctx := context.Background()
	for _, platform := range []string{"slack", "irc"} {
		to := binding.ConversationRef{Channel: platform, ConversationID: "general"}
		_, err := f.out.Deliver(ctx, job("d-"+platform, to, "hello"), nil)
		var fe *delivery.FailedError
		if !errors.As(err, &fe) || !errors.Is(err, delivery.ErrUnknownPlatform) || !errors.Is(err, delivery.ErrRejected) || errors.Is(err, delivery.ErrTransient) {
			t.Fatalf("%s: err = %v, want a permanent FailedError wrapping ErrUnknownPlatform", platform, err)
		}
		want := `platform "` + platform + `": no sender for the destination's platform (this process posts to: discord, matrix)`
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: err text %q lacks %q", platform, err, want)
		}
		rec, _, _ := f.store.GetDelivery(ctx, "d-"+platform)
		if rec.State != delivery.StateFailed || !strings.Contains(rec.Error, want) {
			t.Fatalf("%s: outbox record %+v, want failed with the reason", platform, rec)
		}
		if es := f.entries(t, to); len(es) != 0 {
			t.Fatalf("%s: entries %+v", platform, es)
		}
	}
	if n, err := f.out.Recover(ctx, f.clk.Now().Add(time.Hour)); err != nil || n != 0 {
		t.Fatalf("Recover = %d, %v; want nothing to retry", n, err)
	}
	if dc.sends+mx.sends != 0 {
		t.Fatalf("senders called %d times", dc.sends+mx.sends)
	}
	// An empty Mux says so.
	_, err := senderTable(nil).Send(ctx, job("d9", conv("c1"), "x"))
	if !errors.Is(err, delivery.ErrUnknownPlatform) || !strings.Contains(err.Error(), `send d9: platform "discord": no sender for the destination's platform (this process posts to: none)`) {
		t.Fatalf("empty mux: %v", err)
	}
}

// TestMuxLiveUsesTheDestinationsSender: a live message is posted, edited
// and cut by the LiveSender of its destination's platform (each has its
// own length limit), and its entry holds what that platform displays.
func TestMuxLiveUsesTheDestinationsSender(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	dc, mx := newLiveSender(clk, 12), newLiveSender(clk, 1000)
	t.Cleanup(func() { close(dc.release); close(mx.release) })
	f := newMuxFixture(t, map[string]delivery.Sender{"discord": dc, "matrix": mx})
	text := "one two three four five six"
	for _, tc := range []struct {
		to        binding.ConversationRef
		s, other  *liveSender
		wantParts int
	}{
		{mxThread, mx, dc, 1},
		{conv("c1"), dc, mx, 3},
	} {
		before := len(tc.other.requests())
		l := f.out.Live(context.Background(), delivery.Delivery{ID: "turn:" + tc.to.Channel, Target: tc.to, Producer: delivery.Producer{Source: transcript.SourceTurn, AgentID: "main"}},
			delivery.LiveOptions{Controls: delivery.Controls{StopRun: "7"}, After: f.after.after})
		l.Update(text)
		tc.s.waitReqs(t, 1)
		done := make(chan error, 1)
		go func() { _, err := l.Finish(context.Background(), text); done <- err }()
		for finished := false; !finished; {
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("%s: %v", tc.to.Channel, err)
				}
				finished = true
			case <-f.after.registered:
				f.after.fire(time.Second)
			}
		}
		texts, ids, controls := tc.s.display()
		es := f.entries(t, tc.to)
		if len(texts) != tc.wantParts || strings.Join(texts, "") != text || controls || len(es) != 1 || es[0].Text != text ||
			strings.Join(es[0].MessageIDs, ",") != strings.Join(ids, ",") {
			t.Fatalf("%s: display %q (controls %v), entries %+v", tc.to.Channel, texts, controls, es)
		}
		if n := len(tc.other.requests()); n != before {
			t.Fatalf("%s: the other platform's sender got %d requests", tc.to.Channel, n-before)
		}
	}
}

// TestMuxLiveWhereThereIsNone: Outbound says which destinations can show
// live messages; a live message to a platform whose sender cannot, or to
// an unknown platform, fails with that reason and posts nothing.
func TestMuxLiveWhereThereIsNone(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	dc, mx := newLiveSender(clk, 2000), newFakeSender()
	t.Cleanup(func() { close(dc.release) })
	f := newMuxFixture(t, map[string]delivery.Sender{"discord": dc, "matrix": mx})
	if !f.out.LiveTo(conv("c1")) || f.out.LiveTo(mxRoom) || f.out.LiveTo(binding.ConversationRef{Channel: "slack", ConversationID: "x"}) {
		t.Fatalf("LiveTo: discord %v, matrix %v, slack %v; want true, false, false", f.out.LiveTo(conv("c1")), f.out.LiveTo(mxRoom), f.out.LiveTo(binding.ConversationRef{Channel: "slack", ConversationID: "x"}))
	}
	for _, tc := range []struct {
		to   binding.ConversationRef
		want error
	}{
		{mxRoom, delivery.ErrNotLive},
		{binding.ConversationRef{Channel: "slack", ConversationID: "x"}, delivery.ErrUnknownPlatform},
	} {
		l := f.out.Live(context.Background(), delivery.Delivery{ID: "turn:" + tc.to.Channel, Target: tc.to, Producer: delivery.Producer{Source: transcript.SourceTurn, AgentID: "main"}},
			delivery.LiveOptions{After: f.after.after})
		l.Update("hello")
		if _, err := l.Finish(context.Background(), "hello"); !errors.Is(err, tc.want) || !strings.Contains(err.Error(), `platform "`+tc.to.Channel+`"`) {
			t.Fatalf("%s: Finish err = %v, want %v naming the platform", tc.to.Channel, err, tc.want)
		}
	}
	if mx.sends != 0 || len(dc.requests()) != 0 {
		t.Fatalf("posted: matrix %d sends, discord %d requests", mx.sends, len(dc.requests()))
	}
}

// TestMuxRecoverLiveOnItsPlatform: a live message a crash cut off on
// Matrix is finished by the Matrix sender after a restart (no duplicate,
// the entry holds what it displays).
func TestMuxRecoverLiveOnItsPlatform(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	dc, mx := newLiveSender(clk, 2000), newLiveSender(clk, 2000)
	t.Cleanup(func() { close(dc.release); close(mx.release) })
	mx.hang = func(r liveReq) bool { return !r.post } // the process dies during the first edit
	senders := map[string]delivery.Sender{"discord": dc, "matrix": mx}
	f := newMuxFixture(t, senders)
	l := f.out.Live(context.Background(), delivery.Delivery{ID: "turn:1", Target: mxRoom, Producer: delivery.Producer{Source: transcript.SourceTurn, AgentID: "main"}},
		delivery.LiveOptions{Controls: delivery.Controls{StopRun: "7"}, After: f.after.after})
	l.Update("Hello")
	mx.waitReqs(t, 1)
	l.Update("Hello world")
	f.after.fire(time.Second)
	mx.waitReqs(t, 2)
	mx.mu.Lock()
	mx.hang = nil
	mx.mu.Unlock()
	second := f.outbound(senderTable(senders))
	if n, err := second.Recover(context.Background(), f.clk.Now().Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("recovered %d, err %v", n, err)
	}
	texts, ids, controls := mx.display()
	want := "Hello world" + delivery.InterruptedMark
	es := f.entries(t, mxRoom)
	if len(texts) != 1 || texts[0] != want || controls || len(es) != 1 || es[0].Text != want || es[0].MessageIDs[0] != ids[0] {
		t.Fatalf("display %q (controls %v), entries %+v", texts, controls, es)
	}
	if len(dc.requests()) != 0 {
		t.Fatal("the discord sender was asked to recover a matrix message")
	}
}

// TestLiveRecoverPostsAsResend: a part whose post a crash left without an
// outcome is posted again by Recover as a resend from the first attempt on
// (Delivery.Resend, FirstAttempt), so a sender whose idempotency key does
// not outlive its platform's restarts (Matrix transaction ids) looks for
// it first; the first attempt's post was not one.
func TestLiveRecoverPostsAsResend(t *testing.T) {
	f := newLiveFixture(t, 2000)
	f.sender.hang = func(r liveReq) bool { return r.post }
	l := f.live("turn:1")
	l.Update("Hello")
	f.sender.waitReqs(t, 1)
	f.sender.mu.Lock()
	f.sender.hang = nil
	f.sender.mu.Unlock()
	rec, _, _ := f.store.GetDelivery(context.Background(), "turn:1")
	f.clk.Advance(time.Hour)
	var got delivery.Delivery
	spy := &resendSpy{liveSender: f.sender, got: &got}
	second := delivery.NewOutbound(delivery.OutboundOptions{DefaultAgent: "main"}, delivery.OutboundDeps{Sender: spy, Outbox: f.store, Transcripts: f.tr,
		Bindings: &fakeBindings{}, Clock: f.clk, Log: zerolog.Nop()})
	if n, err := second.Recover(context.Background(), f.clk.Now()); err != nil || n != 1 {
		t.Fatalf("recovered %d, err %v", n, err)
	}
	if r := f.sender.requests(); len(r) < 2 || !r[0].post || r[0].resend || !r[1].post || !r[1].resend {
		t.Fatalf("requests %+v: want the first attempt's post plain, then the recovery's post a resend", r)
	}
	if !got.Resend || !got.FirstAttempt.Equal(rec.CreatedAt) {
		t.Fatalf("recovery posted %+v; want Resend from %s", got, rec.CreatedAt)
	}
	f.checkRule1(t, "Hello"+delivery.InterruptedMark)
}

// resendSpy is a LiveSender that keeps the delivery of the last post.
type resendSpy struct {
	*liveSender
	got *delivery.Delivery
}

func (s *resendSpy) PostLive(ctx context.Context, d delivery.Delivery, part int, text string, c delivery.Controls) (string, error) {
	*s.got = d
	return s.liveSender.PostLive(ctx, d, part, text, c)
}
