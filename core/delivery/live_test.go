package delivery_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/sessionkey"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/store/memory"
)

// liveReq is one request a liveSender got.
type liveReq struct {
	post bool
	id   string
	text string
	ctl  bool
	// buttons: the custom ids of the other buttons the request carried.
	buttons []string
	at      time.Time
	// resend: the post's delivery said an earlier attempt may have displayed it (Delivery.Resend).
	resend bool
}

func buttonIDs(c delivery.Controls) []string {
	var out []string
	for _, b := range c.Buttons {
		out = append(out, b.CustomID)
	}
	return out
}

// liveSender is a hand-written LiveSender: messages it "displays" keep
// their current text and controls; a post repeated for the same (delivery,
// part) returns the first message (a nonce). hang, when it returns true for
// a request, applies the request and then blocks until release is closed
// (the process died before it learnt the outcome). slow, when it returns
// a channel for an edit, applies the edit and confirms it only once that
// channel is closed (a response in transit).
type liveSender struct {
	fakeSender
	clk     clock.Clock
	limit   int
	mu      sync.Mutex
	msgs    map[string]*liveMsg
	order   []string
	nonces  map[string]string
	reqs    []liveReq
	changed chan struct{}
	hang    func(r liveReq) bool
	release chan struct{}
	fail    func(r liveReq) error
	slow    func(r liveReq) <-chan struct{}
}

type liveMsg struct {
	text string
	ctl  bool
}

func newLiveSender(clk clock.Clock, limit int) *liveSender {
	return &liveSender{fakeSender: *newFakeSender(), clk: clk, limit: limit, msgs: map[string]*liveMsg{}, nonces: map[string]string{},
		changed: make(chan struct{}, 1), release: make(chan struct{})}
}

func (s *liveSender) note(r liveReq) error {
	s.reqs = append(s.reqs, r)
	select {
	case s.changed <- struct{}{}:
	default:
	}
	if s.fail != nil {
		return s.fail(r)
	}
	return nil
}

func (s *liveSender) PostLive(_ context.Context, d delivery.Delivery, part int, text string, c delivery.Controls) (string, error) {
	s.mu.Lock()
	key := d.ID + "/" + strconv.Itoa(part)
	r := liveReq{post: true, text: text, ctl: c.StopRun != "", buttons: buttonIDs(c), at: s.clk.Now(), resend: d.Resend}
	if err := s.note(r); err != nil {
		s.mu.Unlock()
		return "", err
	}
	id, ok := s.nonces[key]
	if !ok {
		id = strconv.Itoa(5000 + len(s.order))
		s.nonces[key] = id
		s.order = append(s.order, id)
		s.msgs[id] = &liveMsg{text: text, ctl: r.ctl}
	}
	s.reqs[len(s.reqs)-1].id = id
	hang := s.hang != nil && s.hang(s.reqs[len(s.reqs)-1])
	s.mu.Unlock()
	if hang {
		<-s.release
		return "", errors.New("died")
	}
	return id, nil
}

func (s *liveSender) EditLive(_ context.Context, _ delivery.Delivery, id, text string, c delivery.Controls) error {
	s.mu.Lock()
	r := liveReq{id: id, text: text, ctl: c.StopRun != "", buttons: buttonIDs(c), at: s.clk.Now()}
	if err := s.note(r); err != nil {
		s.mu.Unlock()
		return err
	}
	m := s.msgs[id]
	m.text, m.ctl = text, r.ctl
	hang := s.hang != nil && s.hang(r)
	var slow <-chan struct{}
	if s.slow != nil {
		slow = s.slow(r)
	}
	s.mu.Unlock()
	if hang {
		<-s.release
		return errors.New("died")
	}
	if slow != nil {
		<-slow
	}
	return nil
}

// SplitLive cuts at limit runes, at the last space in the second half.
func (s *liveSender) SplitLive(text string) []string {
	var out []string
	for len([]rune(text)) > s.limit {
		r := []rune(text)
		cut := s.limit
		if i := strings.LastIndex(string(r[:s.limit]), " "); i >= len(string(r[:s.limit]))/2 {
			cut = len([]rune(string(r[:s.limit])[:i+1]))
		}
		out = append(out, string(r[:cut]))
		text = string(r[cut:])
	}
	return append(out, text)
}

// display is what the chat shows: every message's text, in order, and
// whether any still has controls.
func (s *liveSender) display() (texts []string, ids []string, controls bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range s.order {
		texts, ids = append(texts, s.msgs[id].text), append(ids, id)
		controls = controls || s.msgs[id].ctl
	}
	return texts, ids, controls
}

func (s *liveSender) requests() []liveReq {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]liveReq(nil), s.reqs...)
}

// waitReqs waits until the sender got n requests.
func (s *liveSender) waitReqs(t *testing.T, n int) []liveReq {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		if r := s.requests(); len(r) >= n {
			return r
		}
		select {
		case <-s.changed:
		case <-deadline:
			t.Fatalf("sender got %d requests, want %d: %+v", len(s.requests()), n, s.requests())
		}
	}
}

// manualAfter is the pacing clock: fire moves the fake clock and ends
// every wait.
type manualAfter struct {
	mu         sync.Mutex
	clk        *clock.Fake
	chans      []chan time.Time
	waits      []time.Duration
	registered chan struct{}
}

func (a *manualAfter) after(d time.Duration) <-chan time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := make(chan time.Time, 1)
	a.chans, a.waits = append(a.chans, c), append(a.waits, d)
	select {
	case a.registered <- struct{}{}:
	default:
	}
	return c
}

// finishPaced runs finish on its own goroutine (then started, if set) and
// fires the pacing clock every 10 ms until finish returns its error.
func (a *manualAfter) finishPaced(finish func() error, started func()) error {
	done := make(chan error, 1)
	go func() { done <- finish() }()
	if started != nil {
		started()
	}
	for {
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Millisecond):
			a.fire(time.Second)
		}
	}
}

// waitPending waits until a wait is registered (not yet fired).
func (a *manualAfter) waitPending(t *testing.T) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		a.mu.Lock()
		n := len(a.chans)
		a.mu.Unlock()
		if n > 0 {
			return
		}
		select {
		case <-a.registered:
		case <-deadline:
			t.Fatal("nothing waits on the pacing clock")
		}
	}
}

func (a *manualAfter) fire(d time.Duration) {
	now := a.clk.Advance(d)
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range a.chans {
		c <- now
	}
	a.chans = nil
}

type liveFixture struct {
	out    *delivery.Outbound
	sender *liveSender
	store  *memory.Store
	tr     *transcript.Service
	clk    *clock.Fake
	after  *manualAfter
}

func newLiveFixture(t *testing.T, limit int) *liveFixture {
	t.Helper()
	st := memory.New()
	clk := clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	f := &liveFixture{sender: newLiveSender(clk, limit), store: st, tr: transcript.New(transcript.Options{}, transcript.Deps{Store: st, Clock: clk}), clk: clk, after: &manualAfter{clk: clk, registered: make(chan struct{}, 1)}}
	f.out = f.newOutbound()
	t.Cleanup(func() { close(f.sender.release) })
	return f
}

func (f *liveFixture) newOutbound() *delivery.Outbound {
	return delivery.NewOutbound(delivery.OutboundOptions{DefaultAgent: "main"}, delivery.OutboundDeps{Sender: f.sender, Outbox: f.store, Transcripts: f.tr, Bindings: &fakeBindings{}, Clock: f.clk, Log: zerolog.Nop()})
}

func (f *liveFixture) live(id string) *delivery.Live {
	return f.out.Live(context.Background(), liveDelivery(id), delivery.LiveOptions{
		Controls: delivery.Controls{StopRun: "7"}, After: f.after.after})
}

func liveDelivery(id string) delivery.Delivery {
	return delivery.Delivery{ID: id, Target: conv("c1"), Producer: delivery.Producer{Source: transcript.SourceTurn, AgentID: "main"}}
}

func (f *liveFixture) entries(t *testing.T) []transcript.Entry {
	t.Helper()
	es, err := f.tr.Entries(context.Background(), sessionkey.ForConversation("main", conv("c1")), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// checkRule1 asserts that the one entry holds exactly what the chat shows.
func (f *liveFixture) checkRule1(t *testing.T, want string) {
	t.Helper()
	texts, ids, controls := f.sender.display()
	es := f.entries(t)
	if len(es) != 1 {
		t.Fatalf("entries %+v, want one", es)
	}
	if got := strings.Join(texts, ""); got != want || es[0].Text != want {
		t.Fatalf("display %q, entry %q, want %q", got, es[0].Text, want)
	}
	if strings.Join(es[0].MessageIDs, ",") != strings.Join(ids, ",") {
		t.Fatalf("entry ids %v, displayed %v", es[0].MessageIDs, ids)
	}
	if controls {
		t.Fatal("a finished message still has its Stop button")
	}
}

// TestLivePacing: the first text is posted at once; later text is edited
// in at most once per interval per message (the latest text, not every
// step); the final edit removes the controls; the entry is written once,
// after the last edit, with exactly the final display.
func TestLivePacing(t *testing.T) {
	f := newLiveFixture(t, 2000)
	l := f.live("turn:1")
	l.Update("Hello")
	r := f.sender.waitReqs(t, 1)
	if !r[0].post || r[0].text != "Hello" || !r[0].ctl {
		t.Fatalf("first request %+v, want a post of Hello with the Stop button", r[0])
	}
	l.Update("Hello, wor")
	l.Update("Hello, world")
	if n := len(f.sender.requests()); n != 1 {
		t.Fatalf("%d requests before the interval passed, want 1", n)
	}
	if es := f.entries(t); len(es) != 0 {
		t.Fatalf("entry written while streaming: %+v", es)
	}
	f.after.fire(time.Second)
	r = f.sender.waitReqs(t, 2)
	if r[1].post || r[1].text != "Hello, world" || !r[1].ctl {
		t.Fatalf("second request %+v, want an edit to the latest text with the button", r[1])
	}
	done := make(chan error, 1)
	go func() { _, err := l.Finish(context.Background(), "Hello, world!"); done <- err }()
	f.after.fire(500 * time.Millisecond) // not yet a second since the last edit
	select {
	case err := <-done:
		t.Fatalf("finished before the pacing allowed the final edit (%v)", err)
	default:
	}
	f.after.fire(500 * time.Millisecond)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	r = f.sender.requests()
	if len(r) != 3 || r[2].text != "Hello, world!" || r[2].ctl {
		t.Fatalf("requests %+v, want a final edit without the button", r)
	}
	for i := 1; i < len(r); i++ {
		if gap := r[i].at.Sub(r[i-1].at); gap < time.Second {
			t.Fatalf("requests %d and %d for one message %s apart, want at least 1s", i-1, i, gap)
		}
	}
	f.checkRule1(t, "Hello, world!")
	rec, _, _ := f.store.GetDelivery(context.Background(), "turn:1")
	if rec.State != delivery.StateDelivered {
		t.Fatalf("record state %s, want delivered", rec.State)
	}
}

// TestLive30sWithinEditLimit: a 30 s stream with text arriving every 100 ms
// makes at most one request per second for its message, so Discord's edit
// limit (5 per 5 s per channel) is never exceeded.
func TestLive30sWithinEditLimit(t *testing.T) {
	f := newLiveFixture(t, 2000)
	l := f.live("turn:1")
	text := ""
	// Each step is seen by the pump before the next: it either makes a
	// request or waits for the pacing.
	step := func() {
		select {
		case <-f.sender.changed:
		case <-f.after.registered:
		case <-time.After(10 * time.Second):
			t.Fatal("the pump did not react")
		}
	}
	for i := 0; i < 300; i++ {
		text += "w "
		l.Update(text)
		step()
		f.after.fire(100 * time.Millisecond)
		if i%10 == 9 {
			step()
		}
	}
	done := make(chan error, 1)
	go func() { _, err := l.Finish(context.Background(), text); done <- err }()
	for finished := false; !finished; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			finished = true
		default:
			f.after.fire(100 * time.Millisecond)
		}
	}
	r := f.sender.requests()
	for i := range r {
		// Any 5 s window holds at most 5 requests.
		n := 0
		for j := i; j < len(r) && r[j].at.Sub(r[i].at) < 5*time.Second; j++ {
			n++
		}
		if n > 5 {
			t.Fatalf("%d requests within 5 s from request %d", n, i)
		}
	}
	if len(r) < 25 {
		t.Fatalf("only %d requests in a 30 s stream: the message was not kept current", len(r))
	}
	f.checkRule1(t, text)
}

// TestLiveContinuesAtLimit: text past the limit continues in a new message
// at a clean cut; earlier parts are final (no controls), the last one
// carries them; the entry is every part, in order.
func TestLiveContinuesAtLimit(t *testing.T) {
	f := newLiveFixture(t, 20)
	l := f.live("turn:1")
	l.Update("one two three four five six seven")
	r := f.sender.waitReqs(t, 2)
	if !r[0].post || r[0].ctl || r[0].text != "one two three four " || !r[1].post || !r[1].ctl {
		t.Fatalf("requests %+v, want part 1 cut at a space without the button, part 2 with it", r)
	}
	l.Update("one two three four five six seven eight nine ten")
	f.after.fire(time.Second)
	done := make(chan error, 1)
	final := "one two three four five six seven eight nine ten eleven"
	go func() { _, err := l.Finish(context.Background(), final); done <- err }()
	for finished := false; !finished; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			finished = true
		case <-f.sender.changed:
			f.after.fire(time.Second)
		case <-time.After(10 * time.Second):
			t.Fatal("finish did not end")
		}
	}
	texts, _, _ := f.sender.display()
	for i, p := range texts {
		if len([]rune(p)) > 20 {
			t.Fatalf("part %d is %d characters: %q", i, len([]rune(p)), p)
		}
	}
	if len(texts) < 3 {
		t.Fatalf("display %q, want at least 3 parts", texts)
	}
	f.checkRule1(t, final)
}

// TestLiveStopKeepsShown: finishing with what is shown (a stop) keeps the
// displayed text, not text the model produced after the last edit.
func TestLiveStopKeepsShown(t *testing.T) {
	f := newLiveFixture(t, 2000)
	l := f.live("turn:1")
	l.Update("Partial")
	f.sender.waitReqs(t, 1)
	l.Update("Partial answer not shown yet")
	if err := f.after.finishPaced(func() error { _, err := l.FinishShown(context.Background()); return err }, nil); err != nil {
		t.Fatal(err)
	}
	f.checkRule1(t, "Partial")
}

// TestLiveStopDuringEdit: a stop while an edit is in flight (the chat
// already shows it; its confirmation is on the way) keeps that edit: the
// display never goes back to the text before it (a defect: the stop
// finished with Shown(), read before the confirmation, and edited the
// message back).
func TestLiveStopDuringEdit(t *testing.T) {
	f := newLiveFixture(t, 2000)
	l := f.live("turn:1")
	l.Update("Everything is")
	f.sender.waitReqs(t, 1)
	confirm, inFlight := make(chan struct{}), make(chan struct{})
	f.sender.mu.Lock()
	f.sender.slow = func(r liveReq) <-chan struct{} {
		if r.text != "Everything is connected" || !r.ctl {
			return nil
		}
		close(inFlight)
		return confirm
	}
	f.sender.mu.Unlock()
	l.Update("Everything is connected")
	for waiting := true; waiting; {
		select {
		case <-inFlight:
			waiting = false
		case <-time.After(10 * time.Millisecond):
			f.after.fire(time.Second)
		}
	}
	if err := f.after.finishPaced(func() error { _, err := l.FinishShown(context.Background()); return err }, func() { close(confirm) }); err != nil {
		t.Fatal(err)
	}
	for _, r := range f.sender.requests()[2:] {
		if r.text != "Everything is connected" {
			t.Fatalf("after the stop the message was edited to %q", r.text)
		}
	}
	f.checkRule1(t, "Everything is connected")
}

// TestLiveNothingShown: a live message that never got text posts and
// records nothing.
func TestLiveNothingShown(t *testing.T) {
	f := newLiveFixture(t, 2000)
	res, err := f.live("turn:1").Finish(context.Background(), "")
	if err != nil || len(res.MessageIDs) != 0 || len(f.sender.requests()) != 0 || len(f.entries(t)) != 0 {
		t.Fatalf("res %+v err %v requests %v", res, err, f.sender.requests())
	}
	if _, found, _ := f.store.GetDelivery(context.Background(), "turn:1"); found {
		t.Fatal("a record for nothing shown")
	}
}

// TestLivePermanentFailureRecordsShown: an edit the platform refuses
// leaves the part as it was; the entry records exactly that.
func TestLivePermanentFailureRecordsShown(t *testing.T) {
	f := newLiveFixture(t, 2000)
	l := f.live("turn:1")
	l.Update("Shown")
	f.sender.waitReqs(t, 1)
	f.sender.mu.Lock()
	f.sender.fail = func(r liveReq) error {
		if !r.post {
			return delivery.ErrRejected
		}
		return nil
	}
	f.sender.mu.Unlock()
	if err := f.after.finishPaced(func() error { _, err := l.Finish(context.Background(), "Shown and more"); return err }, nil); !errors.Is(err, delivery.ErrPartlyDisplayed) {
		t.Fatalf("err = %v, want partly displayed", err)
	}
	es := f.entries(t)
	if len(es) != 1 || es[0].Text != "Shown" {
		t.Fatalf("entries %+v, want the shown text", es)
	}
}

// TestLiveRecoverAfterCrash: the process dies between a request reaching
// the platform and its outcome being recorded. Recover (a new process)
// finishes the message: no second message is posted, every part shows its
// recorded text with the interrupted mark and no button, and the entry
// records exactly that, once.
func TestLiveRecoverAfterCrash(t *testing.T) {
	tests := []struct {
		name string
		hang func(r liveReq) bool
		want string
	}{
		{"during the first post", func(r liveReq) bool { return r.post }, "Hello" + delivery.InterruptedMark},
		{"during an edit", func(r liveReq) bool { return !r.post }, "Hello world" + delivery.InterruptedMark},
		{"during a continuation post", func(r liveReq) bool { return r.post && strings.HasPrefix(r.text, "nine") }, "one two three four five six seven eight nine ten" + delivery.InterruptedMark},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newLiveFixture(t, 40)
			f.sender.hang = tt.hang
			l := f.live("turn:1")
			if strings.HasPrefix(tt.want, "one") {
				l.Update("one two three four five six seven eight nine ten")
			} else {
				l.Update("Hello")
				f.sender.waitReqs(t, 1)
				l.Update("Hello world")
				f.after.fire(time.Second)
			}
			// Wait until the request that hangs was made: the process "dies" there.
			deadline := time.After(10 * time.Second)
			for hung := false; !hung; {
				for _, r := range f.sender.requests() {
					if tt.hang(r) {
						hung = true
					}
				}
				if !hung {
					select {
					case <-f.sender.changed:
					case <-deadline:
						t.Fatal("the request did not happen")
					}
				}
			}
			f.sender.mu.Lock()
			f.sender.hang = nil
			f.sender.mu.Unlock()
			before := len(f.sender.order)
			second := f.newOutbound()
			n, err := second.Recover(context.Background(), f.clk.Now().Add(time.Hour))
			if err != nil || n != 1 {
				t.Fatalf("recovered %d, err %v", n, err)
			}
			if len(f.sender.order) != before {
				t.Fatalf("recovery posted a duplicate: %d messages, was %d", len(f.sender.order), before)
			}
			f.checkRule1(t, tt.want)
			if n, _ := second.Recover(context.Background(), f.clk.Now().Add(time.Hour)); n != 0 {
				t.Fatalf("a second recovery finished %d deliveries again", n)
			}
			if len(f.entries(t)) != 1 {
				t.Fatal("entry written twice")
			}
		})
	}
}

// TestLiveButtonsAndSharedConversation: buttons are sent with the post
// (no extra edit); SetControls removes them with the next, paced edit;
// two NoSendLock lives in one conversation are live at once (Posted
// returns for each), and each writes its entry once, in Finish order.
func TestLiveButtonsAndSharedConversation(t *testing.T) {
	f := newLiveFixture(t, 2000)
	opt := delivery.LiveOptions{NoSendLock: true, After: f.after.after,
		Controls: delivery.Controls{Buttons: []delivery.Button{{CustomID: "acp:x:0", Label: "Allow"}, {CustomID: "acp:x:1", Label: "Reject", Style: delivery.ButtonDanger}}}}
	ask := f.out.Live(context.Background(), liveDelivery("acp:1"), opt)
	ask.Update("may I?")
	if err := ask.Posted(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := f.sender.requests()
	if len(r) != 1 || !r[0].post || strings.Join(r[0].buttons, ",") != "acp:x:0,acp:x:1" || r[0].ctl {
		t.Fatalf("requests %+v, want one post carrying both buttons (no Stop)", r)
	}
	if ask.Shown() != "may I?" {
		t.Fatalf("shown %q after Posted", ask.Shown())
	}
	next := f.out.Live(context.Background(), liveDelivery("acp:2"), delivery.LiveOptions{NoSendLock: true, After: f.after.after})
	next.Update("meanwhile")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := next.Posted(ctx); err != nil {
		t.Fatalf("a second live message in the conversation was not posted: %v", err)
	}
	ask.SetControls(delivery.Controls{})
	ask.Update("may I? → yes")
	f.after.fire(time.Second)
	r = f.sender.waitReqs(t, 3)
	if r[2].post || r[2].text != "may I? → yes" || len(r[2].buttons) != 0 {
		t.Fatalf("request %+v, want an edit to the answer without buttons", r[2])
	}
	if _, err := ask.Finish(context.Background(), "may I? → yes"); err != nil {
		t.Fatal(err)
	}
	if _, err := next.Finish(context.Background(), "meanwhile"); err != nil {
		t.Fatal(err)
	}
	es := f.entries(t)
	if len(es) != 2 || es[0].Text != "may I? → yes" || es[1].Text != "meanwhile" || es[0].DeliveryID != "acp:1" {
		t.Fatalf("entries %+v, want one per message, in finish order", es)
	}
	if n := len(f.sender.requests()); n != 3 {
		t.Fatalf("%d requests, want 3 (no final edit when nothing changed)", n)
	}
}

// TestLivePacerSharedByMessages: live messages sharing a Pacer make at
// most one edit per interval among them all (Discord's per-channel edit
// limit), while each is still posted at once.
func TestLivePacerSharedByMessages(t *testing.T) {
	f := newLiveFixture(t, 2000)
	// The second edit's response is still in transit when the messages
	// are finished (what a loaded machine does: the request is counted
	// before the pump learns it was confirmed).
	inTransit := make(chan struct{})
	nEdits := 0
	f.sender.slow = func(liveReq) <-chan struct{} {
		if nEdits++; nEdits == 2 {
			return inTransit
		}
		return nil
	}
	p := delivery.NewPacer()
	opt := delivery.LiveOptions{NoSendLock: true, After: f.after.after, Pacer: p}
	a := f.out.Live(context.Background(), liveDelivery("acp:a"), opt)
	b := f.out.Live(context.Background(), liveDelivery("acp:b"), opt)
	a.Update("a1")
	b.Update("b1")
	f.sender.waitReqs(t, 2) // both posted at once
	f.after.fire(time.Second)
	a.Update("a2")
	b.Update("b2")
	f.sender.waitReqs(t, 3)
	// The second edit waits for the interval, however many messages.
	select {
	case <-f.after.registered:
	case <-time.After(10 * time.Second):
		t.Fatal("the second message's edit is not waiting")
	}
	if n := len(f.sender.requests()); n != 3 {
		t.Fatalf("%d requests before the interval passed, want 3: %+v", n, f.sender.requests())
	}
	f.after.fire(time.Second)
	r := f.sender.waitReqs(t, 4)
	var edits []time.Time
	for _, q := range r {
		if !q.post {
			edits = append(edits, q.at)
		}
	}
	if len(edits) != 2 || edits[1].Sub(edits[0]) < time.Second {
		t.Fatalf("edits at %v, want two a second apart", edits)
	}
	// Finish as displayed: Finish(l.Shown()) would read the text before
	// the edit in transit was confirmed and edit it back, paced by a clock
	// nobody fires any more (the 15-minute hang of issue 27.9).
	done := make(chan error, 2)
	for _, l := range []*delivery.Live{a, b} {
		go func() {
			_, err := l.FinishShown(context.Background())
			done <- err
		}()
	}
	close(inTransit)
	for range 2 {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("finishing the live messages hangs")
		}
	}
	if n := len(f.sender.requests()); n != 4 {
		t.Fatalf("%d requests, want 4 (finishing edits nothing back): %+v", n, f.sender.requests())
	}
}
