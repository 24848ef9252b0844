package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/agentbot/agentbot/core/lane"
)

// Handler receives classified inbound events on their conversation's lane (core/lane): one conversation's events
// one at a time in /sync order, different conversations in parallel (see laneOf).
type Handler func(ctx context.Context, in Inbound)

// SyncOptions are the /sync loop's settings.
type SyncOptions struct {
	// TimelineLimit is how many events per room one /sync returns at most (default 100). A room with more since
	// the saved token (a longer downtime) is filled in from /messages, up to MaxCatchUp events per room.
	TimelineLimit int
	// MaxCatchUp bounds that fill-in per room and batch (default 1000); what is older is not handled (a warning).
	MaxCatchUp int
	// DrainTimeout bounds how long a stop waits for events already handed to their lanes (default 15s).
	DrainTimeout time.Duration
}

// SyncDeps are what the /sync loop works with.
type SyncDeps struct {
	// Client is the connection it reads through (its long-poll timeout is the Client's SyncTimeout).
	Client *Client
	// Tokens keeps the /sync position.
	Tokens TokenStore
	// Handler is handed every classified inbound event.
	Handler Handler
	Log     zerolog.Logger
}

// Sync is the /sync loop of one Client (Run). It is separate from the Client so the sender can exist before
// what handles inbound events (which sends through it) does.
type Sync struct {
	opt SyncOptions
	d   SyncDeps
	c   *Client
	log zerolog.Logger
}

// NewSync returns the /sync loop. It does no I/O.
func NewSync(opt SyncOptions, d SyncDeps) (*Sync, error) {
	if d.Client == nil || d.Handler == nil {
		return nil, errors.New("matrix: the sync loop needs a client and a handler")
	}
	if d.Tokens == nil {
		return nil, errors.New("matrix: a sync token store is required")
	}
	if opt.TimelineLimit <= 0 {
		opt.TimelineLimit = 100
	}
	if opt.MaxCatchUp <= 0 {
		opt.MaxCatchUp = 1000
	}
	if opt.DrainTimeout <= 0 {
		opt.DrainTimeout = 15 * time.Second
	}
	return &Sync{opt: opt, d: d, c: d.Client, log: d.Log.With().Str("adapter", "matrix").Logger()}, nil
}

// syncFilter: per-room timelines of at most TimelineLimit events, no presence or account data.
func (s *Sync) syncFilter() string {
	f := map[string]any{
		"room":         map[string]any{"timeline": map[string]any{"limit": s.opt.TimelineLimit}, "account_data": map[string]any{"not_types": []string{"*"}}},
		"presence":     map[string]any{"not_types": []string{"*"}},
		"account_data": map[string]any{"not_types": []string{"*"}},
	}
	b, _ := json.Marshal(f)
	return string(b)
}

// Run is the /sync loop: it resumes from the saved token and hands every classified event to the Handler on the
// event's conversation lane (core/lane), so a conversation waiting on its sends (a streaming reply) never holds up
// /sync or another conversation. A batch's next token is saved once every event of it and of the batches before it
// was handled (a crash re-hands what was not: the core takes an event once). It returns nil when ctx ends (after
// waiting at most DrainTimeout for events already handed), or an error when the token cannot be loaded or saved
// (the position would be lost: the caller decides whether to restart). Failed /sync requests are retried with
// backoff (1s doubling to 30s); a 401 (token revoked) is returned as an error.
func (s *Sync) Run(ctx context.Context) error {
	c, h := s.c, s.d.Handler
	since, err := s.d.Tokens.LoadSyncToken(ctx)
	if err != nil {
		return fmt.Errorf("matrix: sync: %w", err)
	}
	// Events are handled to their end even if ctx ends meanwhile: a clean stop never leaves one half handled.
	hctx := context.WithoutCancel(ctx)
	lanes := lane.New(lane.Options{}, lane.Deps{Context: func() context.Context { return hctx }, Log: s.log})
	sv := newSaver(s.d.Tokens)
	defer func() { s.drain(lanes, sv) }()
	first := since == ""
	filter := s.syncFilter()
	backoff := time.Second
	for ctx.Err() == nil {
		timeout := c.opt.SyncTimeout
		if first {
			timeout = 0
		}
		resp, err := c.bot.FullSyncRequest(ctx, mautrix.ReqSync{Since: since, Timeout: int(timeout / time.Millisecond), FilterID: filter})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			err = classify("matrix: sync", err)
			if errors.Is(err, ErrForbidden) {
				return err
			}
			s.log.Warn().Err(err).Dur("retry_in", backoff).Msg("sync failed")
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
			backoff = min(backoff*2, 30*time.Second)
			continue
		}
		backoff = time.Second
		b := newBatch(resp.NextBatch)
		s.dispatch(hctx, resp, func(in Inbound) { s.push(lanes, b, h, in) }, since)
		b.done()
		select {
		case err := <-sv.failed: // first: a lost position stops the loop before it runs further ahead
			return err
		default:
		}
		select {
		case sv.batches <- b:
		case err := <-sv.failed:
			return err
		case <-ctx.Done():
			return nil // its events still run (drain); its token is not saved: the next start hands them again
		}
		since, first = resp.NextBatch, false
	}
	return nil
}

// drain stops the lanes, waits (at most DrainTimeout) for the events handed to them, and stops the saver once the
// tokens of the batches handled to their end are saved.
func (s *Sync) drain(lanes *lane.Lanes, sv *saver) {
	lanes.Close()
	ctx, cancel := context.WithTimeout(context.Background(), s.opt.DrainTimeout)
	defer cancel()
	if err := lanes.Wait(ctx); err != nil {
		s.log.Warn().Err(err).Msg("sync stopped with events still being handled (handed again at the next start)")
	}
	sv.stop(ctx)
}

// push hands one event to h on its conversation's lane, counted in batch b.
func (s *Sync) push(lanes *lane.Lanes, b *batch, h Handler, in Inbound) {
	if in.Kind != KindInvite {
		s.c.NoteEvent(in.RoomID, in.EventID, in.ThreadRoot) // the homeserver handed it in this room: a thread root there, at once
	}
	key := laneOf(in)
	b.add()
	err := lanes.Push(key, in.Kind.String(), func(ctx context.Context) {
		defer b.finish()
		s.handle(withLane(ctx, lanes, b), h, in)
	})
	if err != nil {
		b.finish()
		s.log.Error().Err(err).Str("room", in.RoomID).Str("event", in.EventID).Msg("inbound event dropped")
	}
}

// dispatch hands a batch's events to h (in order): invites, then each joined room's timeline (rooms sorted by id), a
// truncated one preceded by the events between since and the timeline (from /messages). On the first start
// (since "") the timelines are history from before the bot ran and are skipped.
func (s *Sync) dispatch(ctx context.Context, resp *mautrix.RespSync, h func(Inbound), since string) {
	c := s.c
	for _, roomID := range sortedKeys(resp.Rooms.Invite) {
		in := Inbound{Kind: KindInvite, RoomID: roomID.String()}
		for _, ev := range resp.Rooms.Invite[roomID].State.Events {
			if ev.Type == event.StateMember && ev.StateKey != nil && *ev.StateKey == c.opt.UserID {
				in.Sender = ev.Sender.String()
				var mc struct {
					IsDirect bool `json:"is_direct"`
				}
				if json.Unmarshal(ev.Content.VeryRaw, &mc) == nil {
					in.IsDirect = mc.IsDirect
				}
			}
		}
		if c.class.own(in.Sender) {
			continue
		}
		h(in)
	}
	if since == "" {
		return
	}
	for _, roomID := range sortedKeys(resp.Rooms.Join) {
		room := resp.Rooms.Join[roomID]
		events := room.Timeline.Events
		if room.Timeline.Limited && room.Timeline.PrevBatch != "" {
			events = append(s.catchUp(ctx, roomID, room.Timeline.PrevBatch, since), events...)
		}
		seen := map[id.EventID]bool{}
		for _, ev := range events {
			if seen[ev.ID] {
				continue
			}
			seen[ev.ID] = true
			raw, err := json.Marshal(ev)
			if err != nil {
				continue
			}
			in, ok := c.class.Classify(raw)
			if !ok {
				continue
			}
			in.RoomID = roomID.String()
			h(in)
		}
	}
}

// catchUp returns the room's events between the sync token since and prevBatch (a truncated timeline's start),
// oldest first, at most MaxCatchUp of the newest ones. A failure is logged: the batch goes on with what it has.
func (s *Sync) catchUp(ctx context.Context, roomID id.RoomID, prevBatch, since string) []*event.Event {
	var out []*event.Event
	from := prevBatch
	for len(out) < s.opt.MaxCatchUp {
		resp, err := s.c.bot.Messages(ctx, roomID, from, since, mautrix.DirectionBackward, nil, min(100, s.opt.MaxCatchUp-len(out)))
		if err != nil {
			s.log.Warn().Err(classify("matrix: catch-up", err)).Str("room", roomID.String()).Int("events", len(out)).Msg("sync catch-up incomplete: older events since the last run were not handled")
			break
		}
		out = append(out, resp.Chunk...)
		if resp.End == "" || len(resp.Chunk) == 0 {
			break
		}
		from = resp.End
		if len(out) >= s.opt.MaxCatchUp {
			s.log.Warn().Str("room", roomID.String()).Int("max", s.opt.MaxCatchUp).Msg("sync catch-up truncated: older events since the last run were not handled")
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

func (s *Sync) handle(ctx context.Context, h Handler, in Inbound) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error().Interface("panic", r).Str("room", in.RoomID).Str("event", in.EventID).Msg("inbound handler panicked")
		}
	}()
	h(ctx, in)
}

func sortedKeys[V any](m map[id.RoomID]V) []id.RoomID {
	out := make([]id.RoomID, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
