package delivery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// LiveSender is what a Sender offers for live messages (a reply streamed
// into a message that is edited as its text grows). Outbound owns the
// pacing, the outbox record and the transcript entry; the sender only
// posts and edits.
type LiveSender interface {
	// PostLive posts part `part` of live delivery d showing text, with the
	// controls c. Posting the same (d.ID, part) again returns the message
	// an earlier attempt created (an idempotency key, e.g. a nonce)
	// instead of a second one.
	PostLive(ctx context.Context, d Delivery, part int, text string, c Controls) (messageID string, err error)
	// EditLive makes a posted part show text with the controls c (none
	// removes them).
	EditLive(ctx context.Context, d Delivery, messageID, text string, c Controls) error
	// SplitLive cuts text into message parts at clean points (the
	// platform's length limit); the parts concatenated are text.
	SplitLive(text string) []string
}

// Pacer spaces the edits of the live messages sharing it (LiveOptions.Pacer).
type Pacer struct {
	mu   sync.Mutex
	last time.Time
	used bool
}

// NewPacer returns a pacer for the live messages of one conversation.
func NewPacer() *Pacer { return &Pacer{} }

// take reserves an edit at now, or returns how long to wait for one.
func (p *Pacer) take(now time.Time, interval time.Duration) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.used {
		if wait := p.last.Add(interval).Sub(now); wait > 0 {
			return wait
		}
	}
	p.last, p.used = now, true
	return 0
}

// DefaultLiveInterval is the least time between two requests for one
// message of a live delivery (Discord: about one edit per second).
const DefaultLiveInterval = time.Second

// InterruptedMark ends the text of a live message that a crash cut off,
// when Recover finishes it: the chat shows the reply was cut short, and
// the transcript records the mark with the rest.
const InterruptedMark = "\n\n*(reply interrupted)*"

// ErrNotLive: the Sender cannot display live messages.
var ErrNotLive = errors.New("sender cannot display live messages")

// LiveOptions tune a live delivery.
type LiveOptions struct {
	// Controls are carried by the last part while the message is live
	// (SetControls changes them).
	Controls Controls
	// NoSendLock: the Live does not take its conversation's send lock. For
	// a caller that shows several live messages in one conversation at
	// once: it holds the lock for all of them itself (Outbound.Hold, from
	// the first post until the last entry is written) and orders them (an
	// ACP turn: Posted before the next message, Finish in display order).
	NoSendLock bool
	// Commit writes a turn reply's entry (see CommitFunc); nil lets
	// Outbound write it.
	Commit CommitFunc
	// Interval is the least time between two requests for one message
	// (default DefaultLiveInterval).
	Interval time.Duration
	// Pacer, if set, is shared by several live messages of one
	// conversation (an ACP turn's): among them all, at most one edit per
	// Interval, so together they stay within the platform's per-channel
	// edit limit (Discord: 5 per 5 s). Posts are not held back by it.
	Pacer *Pacer
	// After paces the edits (default time.After); tests inject one.
	After func(time.Duration) <-chan time.Time
	// OnRequest, if set, is called just before each post or edit (metrics,
	// benchmarks).
	OnRequest func(kind string)
}

// Live is one live message: posted when its first text arrives, edited as
// the text grows (at most once per Interval per message), continued into
// a new message at the sender's length limit, and finalized by Finish,
// which removes the controls and writes the transcript entry once, with
// exactly the final displayed text and every message id (Rule 1).
//
// From its first post until Finish returns, a live message holds its
// conversation's send lock: nothing else is displayed (or written) in the
// conversation in between, so transcript order stays display order.
//
// Crash safety: before every post or edit, the outbox record holds the
// text each part is about to show and the ids of the parts already posted;
// after a post it holds the new id. Recover finishes an interrupted live
// delivery: it re-posts a part whose id is unknown under the same
// idempotency key (finding the one displayed, never a duplicate), edits
// every part to its recorded text with InterruptedMark and no controls,
// and writes the entry.
type Live struct {
	o     *Outbound
	ls    LiveSender
	lsErr error // why ls is nil: ErrNotLive, ErrUnknownPlatform
	d     Delivery
	opt   LiveOptions

	mu    sync.Mutex
	want  string
	final bool
	keep  bool // final: show what is displayed when the pump plans (FinishShown)
	kick  chan struct{}
	done  chan struct{}
	shown string // text displayed so far (what the chat shows)
	res   Result
	err   error
	ctls  Controls      // the controls wanted now (opt.Controls, then SetControls)
	cgen  int           // generation of ctls (a part showing them records it)
	wgen  int           // generation of want
	tgen  int           // the want generation whose posts were all attempted
	tried chan struct{} // closed and replaced when tgen moves or the pump ends

	// owned by the pump goroutine
	rec       Record
	started   bool
	skip      bool // the delivery was already confirmed: display nothing
	ids       []string
	parts     []string // text each posted part shows (as confirmed)
	ctl       []int    // the controls generation each posted part shows (0 none, -1 unknown)
	fixed     []string // parts that are cut: their text never changes
	last      map[int]time.Time
	attempted map[int]bool // parts a post was attempted for
	claimedAt time.Time
	renewAt   time.Time // when the claim is renewed next (with a Claimer)
	release   func()    // ends this process's ownership (Outbound.hold)
	failed    error
	unlock    func()
	recovered bool
}

// Live starts a live delivery of d (d.Text is ignored: the text comes from
// Update and Finish). It does no I/O until the first Update with text.
// The caller must call Finish (also after an error or a stop).
func (o *Outbound) Live(ctx context.Context, d Delivery, opt LiveOptions) *Live {
	if opt.Interval <= 0 {
		opt.Interval = DefaultLiveInterval
	}
	if opt.After == nil {
		opt.After = time.After
	}
	d.Target = d.Target.Normalize()
	d.Text = ""
	if checkFiles(d) == nil {
		// (Files past the limits are refused at the post, unread.)
		d.Files = o.redactFiles(d.Files)
	}
	l := &Live{o: o, d: d, opt: opt, kick: make(chan struct{}, 1), done: make(chan struct{}), last: map[int]time.Time{}, attempted: map[int]bool{},
		ctls: opt.Controls, cgen: 1, tried: make(chan struct{})}
	l.ls, l.lsErr = o.liveSenderFor(d.Target)
	// This process owns the delivery while the pump runs: Recover leaves
	// it alone, however old it grows (invariant 19).
	l.release = o.hold(d.ID)
	go l.run(context.WithoutCancel(ctx))
	return l
}

// Update sets the text the message should show now (the whole text so
// far; each call's text extends the previous one). It never blocks on
// I/O: the edit follows when the pacing allows.
func (l *Live) Update(text string) {
	l.mu.Lock()
	if l.final {
		l.mu.Unlock()
		return
	}
	l.want = l.o.redactLive(text, false)
	l.wgen++
	l.mu.Unlock()
	l.poke()
}

// redactLive is the text a live message shows for text (invariant 14):
// redacted; while it grows, without an end that may be the start of a
// known secret (redaction recognises it only whole; it shows with the
// next update or Finish).
func (o *Outbound) redactLive(text string, final bool) string {
	if o.redact == nil {
		return text
	}
	if !final {
		text = text[:len(text)-o.redact.Unfinished(text)]
	}
	return o.redact.String(text)
}

// SetControls replaces the controls the growing part carries (none:
// removed), with the next request (paced like an edit).
func (l *Live) SetControls(c Controls) {
	l.mu.Lock()
	if l.final {
		l.mu.Unlock()
		return
	}
	l.ctls = c
	l.cgen++
	l.mu.Unlock()
	l.poke()
}

// Posted waits until every message the latest text needs has been posted
// (or its post attempted and failed, or the delivery stopped), so a
// caller showing several live messages can keep them in order: the next
// one is posted below this one. Edits may still be pending.
func (l *Live) Posted(ctx context.Context) error {
	for {
		l.mu.Lock()
		ok, ch := l.tgen >= l.wgen, l.tried
		l.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-l.done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Shown returns the text the chat displays so far.
func (l *Live) Shown() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.shown
}

// Finish makes the message show text without controls (after the pacing
// allows), then writes the transcript entry once. An empty text with
// nothing displayed posts nothing. A failure after something was displayed
// records what is displayed (or leaves the record to Recover when a
// request's outcome is unknown) and returns *FailedError.
func (l *Live) Finish(ctx context.Context, text string) (Result, error) {
	return l.finish(ctx, text, false)
}

// FinishShown finishes the message as the chat displays it once the
// request in flight (if any) has completed: no text is added and nothing
// displayed is taken back; the controls are removed and the entry records
// exactly that display. For a stopped turn: unlike Finish(ctx, l.Shown()),
// it cannot undo an edit that was confirmed after Shown was read.
func (l *Live) FinishShown(ctx context.Context) (Result, error) {
	return l.finish(ctx, "", true)
}

// finish makes the text final (the first call wins; keep: what is shown)
// and waits for the pump to finish.
func (l *Live) finish(ctx context.Context, text string, keep bool) (Result, error) {
	l.mu.Lock()
	if !l.final {
		l.want, l.final, l.keep = l.o.redactLive(text, true), true, keep
		l.wgen++
	}
	l.mu.Unlock()
	l.poke()
	select {
	case <-l.done:
	case <-ctx.Done():
		<-l.done // the pump finishes on its own (context.WithoutCancel)
	}
	return l.res, l.err
}

func (l *Live) poke() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// op is one request: post part i (i == len(ids)) or edit it.
type op struct {
	part int
	text string
	ctl  int      // controls generation to show (0: none)
	c    Controls // the controls of generation ctl
	post bool
}

// plan lists the requests that make the chat show want (controls on the
// last part unless final), fixing the parts that are cut.
func (l *Live) plan(want string, final bool, ctls Controls, cgen int) []op {
	rest, ok := strings.CutPrefix(want, strings.Join(l.fixed, ""))
	if !ok {
		// Text only grows; a shorter one keeps the parts already cut.
		rest = ""
	}
	var parts []string
	if strings.TrimSpace(rest) != "" {
		parts = l.ls.SplitLive(rest)
	}
	if !final && len(parts) > 1 {
		// Cut: the earlier parts are done; only the last one grows.
		l.fixed = append(l.fixed, parts[:len(parts)-1]...)
		parts = parts[len(parts)-1:]
	}
	all := append(slices.Clone(l.fixed), parts...)
	var ops []op
	for i, text := range all {
		ctl, c := 0, Controls{}
		if !final && i == len(all)-1 && !ctls.Empty() {
			ctl, c = cgen, ctls
		}
		switch {
		case i >= len(l.ids):
			ops = append(ops, op{part: i, text: text, ctl: ctl, c: c, post: true})
		case l.parts[i] != text || l.ctl[i] != ctl:
			ops = append(ops, op{part: i, text: text, ctl: ctl, c: c})
		}
	}
	if final {
		// Parts past the final text (none normally) lose their controls.
		for i := len(all); i < len(l.ids); i++ {
			if l.ctl[i] != 0 {
				ops = append(ops, op{part: i, text: l.parts[i]})
			}
		}
	}
	return ops
}

// planKeep lists the requests that leave every posted part showing what
// it displays, without controls; nothing more is posted.
func (l *Live) planKeep() []op {
	var ops []op
	for i := range l.ids {
		text := l.parts[i]
		if text == unknownText {
			// A re-posted part: show what its last request was to show.
			text = l.rec.LiveParts[i]
		}
		if l.ctl[i] != 0 || text != l.parts[i] {
			ops = append(ops, op{part: i, text: text})
		}
	}
	return ops
}

// finalAttempts bounds how many times a failing final request is retried
// (each after the sender's own retries) before the delivery is left
// pending for Recover.
const finalAttempts = 3

// run is the pump: one goroutine does every request, in order.
func (l *Live) run(ctx context.Context) {
	defer close(l.done)
	defer l.release()
	defer func() {
		l.mu.Lock()
		l.tgen = l.wgen
		close(l.tried)
		l.mu.Unlock()
	}()
	defer func() {
		if l.unlock != nil {
			l.unlock()
		}
	}()
	l.loop(ctx)
}

func (l *Live) loop(ctx context.Context) {
	finalFails := 0
	for {
		l.mu.Lock()
		want, final, keep, wgen, ctls, cgen := l.want, l.final, l.keep, l.wgen, l.ctls, l.cgen
		l.mu.Unlock()
		if l.ls == nil {
			if final {
				l.err = fmt.Errorf("live delivery %s: %w", l.d.ID, l.lsErr)
				return
			}
			l.noteTried(nil, wgen)
			<-l.kick
			continue
		}
		l.renew(ctx) // when due (a wait for it may have ended by a kick)
		var ops []op
		switch {
		case l.failed != nil || l.skip:
		case keep:
			ops = l.planKeep()
		default:
			ops = l.plan(want, final, ctls, cgen)
		}
		l.noteTried(ops, wgen)
		if len(ops) > 0 && !l.started {
			if err := l.start(ctx); err != nil {
				l.o.log.Error().Err(err).Str("delivery", l.d.ID).Msg("live delivery: start")
				l.failed = err
				continue
			}
			if l.skip {
				continue
			}
		}
		if len(ops) == 0 {
			if final {
				l.res, l.err = l.finalize(ctx)
				return
			}
			// Idle (a turn waits for its model, an ACP agent for a
			// permission): the claim is still renewed while it lives.
			select {
			case <-l.kick:
			case <-l.renewal():
				l.renew(ctx)
			}
			continue
		}
		next := ops[0]
		if !l.recovered {
			var wait time.Duration
			if t, ok := l.last[next.part]; ok {
				wait = t.Add(l.opt.Interval).Sub(l.o.clock.Now())
			}
			if wait <= 0 && !next.post && l.opt.Pacer != nil {
				wait = l.opt.Pacer.take(l.o.clock.Now(), l.opt.Interval)
			}
			if wait > 0 {
				select {
				case <-l.opt.After(wait):
				case <-l.kick:
					// Newer text: plan again (still paced).
				case <-l.renewal():
					l.renew(ctx)
				}
				continue
			}
		}
		if err := l.do(ctx, next); err != nil && final {
			if finalFails++; finalFails >= finalAttempts {
				l.res, l.err = l.unfinished(ctx, err)
				return
			}
		}
	}
}

// noteTried lets Posted return once every post the text of generation
// wgen needs was attempted.
func (l *Live) noteTried(ops []op, wgen int) {
	for _, p := range ops {
		if p.post && !l.attempted[p.part] {
			return
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if wgen > l.tgen {
		l.tgen = wgen
		close(l.tried)
		l.tried = make(chan struct{})
	}
}

// start takes the conversation's send lock and records the delivery. It
// counts as started only once it succeeded: a failed start has displayed
// and recorded nothing, and finalize writes nothing for it (the outbox
// may hold an earlier attempt it could not read).
func (l *Live) start(ctx context.Context) error {
	if !l.opt.NoSendLock && l.unlock == nil {
		l.unlock = l.o.locks.lock(l.d.Target.Key())
	}
	prev, found, err := l.o.outbox.GetDelivery(ctx, l.d.ID)
	if err != nil {
		return fmt.Errorf("live delivery %s: read outbox: %w", l.d.ID, err)
	}
	if found {
		// Confirmed (or being finished) before: never displayed twice.
		l.started, l.skip, l.rec = true, true, prev
		return nil
	}
	now := l.o.clock.Now()
	rec := Record{Delivery: l.d, State: StatePending, Live: true, CreatedAt: now, UpdatedAt: now}
	if l.o.claimer == nil {
		// The first request's intent is the first write (one store write
		// before the first post: the first words show sooner).
		l.started, l.rec = true, rec
		return nil
	}
	if err := l.o.outbox.PutDelivery(ctx, rec); err != nil {
		return fmt.Errorf("live delivery %s: record pending: %w", l.d.ID, err)
	}
	if err := l.o.claim(ctx, l.d.ID); err != nil {
		return err
	}
	l.started, l.rec, l.claimedAt, l.renewAt = true, rec, now, now.Add(l.o.lease/3)
	return nil
}

// renewal returns a channel that fires when the claim is due for renewal
// (nil without a claim to renew: one process, or nothing recorded yet).
// The pump renews it while the message lives, whether or not it sends.
func (l *Live) renewal() <-chan time.Time {
	if l.o.claimer == nil || !l.started || l.skip || l.recovered || l.failed != nil {
		return nil
	}
	return l.opt.After(max(l.renewAt.Sub(l.o.clock.Now()), 0))
}

// renew renews the claim once a third of the lease has passed. A claim
// another process took stops the delivery where it is (that process
// finishes it); a store error is retried soon.
func (l *Live) renew(ctx context.Context) {
	if l.o.claimer == nil || !l.started || l.skip || l.recovered || l.failed != nil {
		return
	}
	now := l.o.clock.Now()
	if now.Before(l.renewAt) {
		return
	}
	if err := l.o.claim(ctx, l.d.ID); err != nil {
		if errors.Is(err, ErrClaimed) {
			l.o.log.Error().Err(err).Str("delivery", l.d.ID).Msg("live delivery: claim lost")
			l.failed = err
			return
		}
		l.o.log.Warn().Err(err).Str("delivery", l.d.ID).Msg("live delivery: renew claim")
		l.renewAt = now.Add(max(l.o.lease/10, time.Second))
		return
	}
	l.claimedAt, l.renewAt = now, now.Add(l.o.lease/3)
}

// do runs one request: the record first says what the part is about to
// show (and, after a post, its id), so a crash leaves Recover all it
// needs. It returns a transient failure (the request is planned again);
// a permanent one stops the delivery where it is.
func (l *Live) do(ctx context.Context, p op) error {
	intent := slices.Clone(l.parts)
	if p.post {
		intent = append(intent, p.text)
	} else {
		intent[p.part] = p.text
	}
	l.last[p.part] = l.o.clock.Now()
	if l.renew(ctx); l.failed != nil {
		return nil
	}
	l.rec.LiveParts, l.rec.MessageIDs, l.rec.UpdatedAt = intent, slices.Clone(l.ids), l.o.clock.Now()
	if err := l.o.outbox.PutDelivery(ctx, l.rec); err != nil {
		// Without the intent on record a crash could leave the display
		// unrecorded: do not send.
		l.o.log.Error().Err(err).Str("delivery", l.d.ID).Msg("live delivery: record intent")
		return fmt.Errorf("record intent: %w: %w", err, ErrTransient)
	}
	c := p.c
	if l.opt.OnRequest != nil {
		kind := "edit"
		if p.post {
			kind = "post"
		}
		l.opt.OnRequest(kind)
	}
	var err error
	if p.post {
		// A repeated post returns the message an earlier attempt created,
		// which shows that attempt's text: it is edited next.
		retried := l.recovered || l.attempted[p.part]
		l.attempted[p.part] = true
		var id string
		if p.part == 0 && len(l.d.Files) > 0 {
			id, err = l.postFiles(ctx, p.text, c)
		} else {
			id, err = l.ls.PostLive(ctx, l.d, p.part, p.text, c)
		}
		if err == nil {
			shows := p.text
			if retried {
				shows = unknownText
			}
			ctl := p.ctl
			if retried {
				ctl = -1 // what the earlier attempt showed is not known
			}
			l.ids, l.parts, l.ctl = append(l.ids, id), append(l.parts, shows), append(l.ctl, ctl)
			l.rec.MessageIDs = slices.Clone(l.ids)
			if perr := l.o.outbox.PutDelivery(ctx, l.rec); perr != nil {
				l.o.log.Error().Err(perr).Str("delivery", l.d.ID).Msg("live delivery: record posted part")
			}
		}
	} else {
		err = l.ls.EditLive(ctx, l.d, l.ids[p.part], p.text, c)
		if err == nil {
			l.parts[p.part], l.ctl[p.part] = p.text, p.ctl
		}
	}
	if err == nil {
		l.mu.Lock()
		l.shown = strings.Join(l.parts, "")
		if p.post && l.parts[p.part] == unknownText {
			l.shown = strings.Join(l.parts[:p.part], "") + p.text
		}
		l.mu.Unlock()
		return nil
	}
	if errors.Is(err, ErrTransient) {
		// Outcome unknown (or nothing happened): planned again, paced.
		l.o.log.Warn().Err(err).Str("delivery", l.d.ID).Int("part", p.part).Msg("live delivery: request failed; retrying")
		return err
	}
	// Permanent: the part shows what it showed before; nothing more is sent.
	l.o.log.Warn().Err(err).Str("delivery", l.d.ID).Int("part", p.part).Msg("live delivery: request refused; keeping what is shown")
	l.failed = err
	return nil
}

// finalize records the delivery once every request is confirmed: the
// entry holds exactly the parts displayed.
func (l *Live) finalize(ctx context.Context) (Result, error) {
	switch {
	case l.skip:
		if l.rec.State == StateSent || l.rec.State == StateDelivered {
			return l.o.finish(ctx, l.rec, Receipt{MessageIDs: l.rec.MessageIDs, Duplicate: true}, l.opt.Commit, true)
		}
		return Result{}, &FailedError{DeliveryID: l.d.ID, Target: l.d.Target,
			Err: fmt.Errorf("an earlier attempt is unfinished (%s): %w", l.rec.State, ErrTransient)}
	case !l.started:
		if l.failed != nil {
			return Result{}, &FailedError{DeliveryID: l.d.ID, Target: l.d.Target, Err: l.failed}
		}
		return Result{}, nil // nothing to show
	}
	rec := l.rec
	now := l.o.clock.Now()
	if len(l.ids) == 0 {
		rec.State, rec.LiveParts, rec.UpdatedAt = StateFailed, nil, now
		if l.failed != nil {
			rec.Error = l.failed.Error()
		}
		if err := l.o.outbox.PutDelivery(ctx, rec); err != nil {
			l.o.log.Error().Err(err).Str("delivery", l.d.ID).Msg("live delivery: record failure")
		}
		l.o.observe(rec)
		return Result{}, &FailedError{DeliveryID: l.d.ID, Target: l.d.Target, Err: l.failed}
	}
	rec.Delivery.Text = strings.Join(l.parts, "")
	rec.State, rec.MessageIDs, rec.LiveParts, rec.UpdatedAt = StateSent, slices.Clone(l.ids), slices.Clone(l.parts), now
	if l.failed != nil {
		rec.Error = l.failed.Error()
	}
	// The receipt first: from here a restart writes the entry, never
	// edits again.
	if err := l.o.outbox.PutDelivery(ctx, rec); err != nil {
		l.o.log.Error().Err(err).Str("delivery", l.d.ID).Msg("live delivery: record receipt")
	}
	res, err := l.o.finish(ctx, rec, Receipt{MessageIDs: slices.Clone(l.ids)}, l.opt.Commit, l.recovered)
	if err == nil && l.failed != nil {
		err = &FailedError{DeliveryID: l.d.ID, Target: l.d.Target,
			Err: fmt.Errorf("%w: %d part(s) shown: %w", ErrPartlyDisplayed, len(l.ids), l.failed)}
	}
	return res, err
}

// unfinished gives up on a final request whose outcome stays unknown: the
// record keeps the intent, pending, and Recover finishes it at the next
// start (the chat may show either text until then).
func (l *Live) unfinished(ctx context.Context, err error) (Result, error) {
	l.rec.Error, l.rec.UpdatedAt = err.Error(), l.o.clock.Now()
	if perr := l.o.outbox.PutDelivery(ctx, l.rec); perr != nil {
		l.o.log.Error().Err(perr).Str("delivery", l.d.ID).Msg("live delivery: record unfinished")
	}
	l.o.observe(l.rec)
	return Result{MessageIDs: slices.Clone(l.ids)}, &FailedError{DeliveryID: l.d.ID, Target: l.d.Target, Err: err}
}
