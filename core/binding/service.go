package binding

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/clock"
)

// BindInput describes a new binding.
type BindInput struct {
	TargetSessionKey string
	TargetKind       TargetKind
	Conversation     ConversationRef
	AgentID          string
	Label            string
	BoundBy          string
	IdleTimeout      time.Duration
	MaxAge           time.Duration
	Metadata         map[string]string
}

// UnbindInput selects bindings to end: by ID, or every active binding of a
// session. Reason is required.
type UnbindInput struct {
	ID               string
	TargetSessionKey string
	Reason           string
}

// EndedFunc is called (outside the service's lock) for every binding that
// ends, with the final record; EndedReason says why.
type EndedFunc func(Record)

// Service owns the bindings: an in-memory index of the active ones, served
// to the hot routing path, backed by a Store that is the truth after a
// restart. It is safe for concurrent use.
type Service struct {
	opt   Options
	store Store
	clock clock.Clock
	log   zerolog.Logger
	newID func() string

	mu      sync.RWMutex
	idx     index               // the active bindings
	dirty   map[string]struct{} // touched since the last flush
	onEnded EndedFunc           // nil: nobody listens
	// ever holds every session that has had a binding, active or ended,
	// whatever made it (spawn or /focus): such a session's completions
	// never fall back to its requester (invariant 6).
	ever map[string]struct{}
	// disabled (threadBindings.enabled: false): stored bindings are kept
	// but neither indexed nor written, so nothing routes through them and
	// enabling the flag again restores them (invariant 8).
	disabled bool
	// writes counts the store writes made under mu (bind, unbind, sweep,
	// timeouts), so Refresh can tell whether what it read is older than
	// the index (see refresh.go).
	writes uint64

	refreshMu sync.Mutex // one Refresh at a time
}

// Options tune a Service.
type Options struct {
	// SweepInterval is how often Run ends expired bindings and flushes
	// activity (default DefaultSweepInterval).
	SweepInterval time.Duration
	// Disabled makes the service route nothing and write nothing
	// (threadBindings.enabled: false). Stored bindings are kept as they
	// are, so a later start with bindings enabled restores them.
	Disabled bool
}

// DefaultSweepInterval is Options.SweepInterval's default.
const DefaultSweepInterval = time.Minute

// Deps are what a Service works with.
type Deps struct {
	Store Store
	Clock clock.Clock
	Log   zerolog.Logger
	// OnEnded, if set, is called with every binding that ends, after the
	// store write (the wiring fans it out to sessions and ACP agents).
	OnEnded EndedFunc
}

// New returns a service; call Load before use. It does no I/O.
func New(opt Options, d Deps) *Service {
	if opt.SweepInterval <= 0 {
		opt.SweepInterval = DefaultSweepInterval
	}
	return &Service{
		opt:      opt,
		store:    d.Store,
		clock:    d.Clock,
		log:      d.Log,
		newID:    randomID,
		onEnded:  d.OnEnded,
		disabled: opt.Disabled,
		idx:      newIndex(),
		dirty:    map[string]struct{}{},
		ever:     map[string]struct{}{},
	}
}

// ErrDisabled: thread bindings are disabled; nothing was bound.
var ErrDisabled = errors.New("thread bindings are disabled")

// EverBound reports whether the session has ever had a binding, active or
// ended, made by anything. Disabled bindings report false: the bot then
// behaves as if nothing had ever been bound.
func (s *Service) EverBound(key string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, ok := s.ever[key]
	return ok
}

func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Load reads the store and builds the index of active bindings.
func (s *Service) Load(ctx context.Context) error {
	recs, err := s.store.Bindings(ctx)
	if err != nil {
		return fmt.Errorf("load bindings: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.disabled {
		return nil
	}
	for i := range recs {
		s.ever[recs[i].TargetSessionKey] = struct{}{}
		if recs[i].Status != StatusActive {
			continue
		}
		s.index(recs[i])
	}
	return nil
}

// index stores a copy of rec and indexes it; s.mu must be held.
func (s *Service) index(rec Record) { s.idx.add(rec) }

// unindex drops r from the index (its slot is reused); s.mu must be held.
func (s *Service) unindex(r *Record) {
	delete(s.dirty, r.ID)
	s.idx.remove(r)
}

// Bind binds a conversation to a session. A conversation has at most one
// active binding: an existing binding to the same target is returned
// unchanged; one to another target is ended with reason "rebound". A
// session is bound to at most one conversation: its binding elsewhere is
// ended with reason "moved" (metadata movedTo names the new conversation),
// in the same store write, and EndedFuncs see it so the old conversation
// can be told where the session went.
func (s *Service) Bind(ctx context.Context, in BindInput) (Record, error) {
	conv := in.Conversation.Normalize()
	if !conv.Valid() {
		return Record{}, fmt.Errorf("bind: conversation %+v: %w", in.Conversation, ErrInvalidInput)
	}
	if in.TargetSessionKey == "" {
		return Record{}, fmt.Errorf("bind: empty target session: %w", ErrInvalidInput)
	}
	if in.TargetKind == "" {
		in.TargetKind = KindSession
	}
	now := s.clock.Now()
	rec := Record{
		ID:               s.newID(),
		TargetSessionKey: in.TargetSessionKey,
		TargetKind:       in.TargetKind,
		Conversation:     conv,
		Status:           StatusActive,
		AgentID:          in.AgentID,
		Label:            in.Label,
		BoundBy:          in.BoundBy,
		BoundAt:          now,
		LastActivityAt:   now,
		IdleTimeout:      in.IdleTimeout,
		MaxAge:           in.MaxAge,
		Metadata:         cloneMap(in.Metadata),
	}

	s.mu.Lock()
	if s.disabled {
		s.mu.Unlock()
		return Record{}, fmt.Errorf("bind %s: %w", conv.ConversationID, ErrDisabled)
	}
	old := s.idx.lookup(conv)
	if old != nil && old.TargetSessionKey == rec.TargetSessionKey && old.TargetKind == rec.TargetKind && old.ExpiryReason(now) == "" {
		out := *old
		s.mu.Unlock()
		return out, nil
	}
	writes := []Record{rec}
	var ended []Record
	var gone []*Record
	if old != nil {
		e := endRecord(*old, ReasonRebound, now)
		if old.ExpiryReason(now) != "" {
			e = endRecord(*old, old.ExpiryReason(now), now)
		}
		ended, gone = append(ended, e), append(gone, old)
	}
	for _, r := range s.idx.bySession[rec.TargetSessionKey] {
		if r == old {
			continue
		}
		e := endRecord(*r, ReasonMoved, now)
		if why := r.ExpiryReason(now); why != "" {
			e = endRecord(*r, why, now) // it had ended already; no move notice
		} else {
			e.Metadata = cloneMap(r.Metadata)
			if e.Metadata == nil {
				e.Metadata = map[string]string{}
			}
			e.Metadata[MetaMovedTo] = conv.ConversationID
		}
		ended, gone = append(ended, e), append(gone, r)
	}
	writes = append(writes, ended...)
	if err := s.store.PutBindings(ctx, writes...); err != nil {
		s.mu.Unlock()
		return Record{}, fmt.Errorf("bind %s: %w", conv.ConversationID, err)
	}
	s.writes++
	for _, r := range gone {
		s.unindex(r)
	}
	s.index(rec)
	s.ever[rec.TargetSessionKey] = struct{}{}
	s.mu.Unlock()

	sortRecords(ended)
	for _, e := range ended {
		s.notify(e)
	}
	return rec, nil
}

// ErrInvalidInput reports a bind request that names no conversation or session.
var ErrInvalidInput = errors.New("invalid binding input")

func endRecord(r Record, reason string, now time.Time) Record {
	r.Status = StatusEnded
	r.EndedAt = now
	r.EndedReason = reason
	return r
}

func cloneMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// ResolveByConversation returns the active, unexpired binding of a
// conversation. It reads only the in-memory index and does not allocate;
// the returned record's Metadata must be treated as read-only.
func (s *Service) ResolveByConversation(ref ConversationRef) (Record, bool) {
	ref = ref.Normalize()
	s.mu.RLock()
	r := s.idx.lookup(ref)
	if r == nil {
		s.mu.RUnlock()
		return Record{}, false
	}
	out := *r
	s.mu.RUnlock()
	if (out.IdleTimeout > 0 || out.MaxAge > 0) && out.ExpiryReason(s.clock.Now()) != "" {
		return Record{}, false
	}
	return out, true
}

// Get returns an active, unexpired binding by id.
func (s *Service) Get(id string) (Record, bool) {
	s.mu.RLock()
	r := s.idx.byID[id]
	var out Record
	if r != nil {
		out = *r
	}
	s.mu.RUnlock()
	if r == nil || out.ExpiryReason(s.clock.Now()) != "" {
		return Record{}, false
	}
	return out, true
}

// ListBySession returns the active, unexpired bindings of a session.
func (s *Service) ListBySession(key string) []Record {
	now := s.clock.Now()
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []Record
	for _, r := range s.idx.bySession[key] {
		if r.ExpiryReason(now) == "" {
			out = append(out, *r)
		}
	}
	sortRecords(out)
	return out
}

// Active returns every active, unexpired binding.
func (s *Service) Active() []Record {
	now := s.clock.Now()
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]Record, 0, len(s.idx.byID))
	for _, r := range s.idx.byID {
		if r.ExpiryReason(now) == "" {
			out = append(out, *r)
		}
	}
	sortRecords(out)
	return out
}

// All returns every stored binding, active and ended, with active ones as
// the index holds them (including unflushed activity).
func (s *Service) All(ctx context.Context) ([]Record, error) {
	recs, err := s.store.Bindings(ctx)
	if err != nil {
		return nil, fmt.Errorf("list bindings: %w", err)
	}
	s.mu.RLock()
	for i := range recs {
		if r := s.idx.byID[recs[i].ID]; r != nil {
			recs[i] = *r
		}
	}
	s.mu.RUnlock()
	sortRecords(recs)
	return recs, nil
}

// Touch records activity on a binding at t (the later time wins). It is
// kept in memory and persisted by Flush.
func (s *Service) Touch(id string, at time.Time) {
	if id == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.idx.byID[id]
	if r == nil || !at.After(r.LastActivityAt) {
		return
	}
	r.LastActivityAt = at
	s.dirty[id] = struct{}{}
}

// SetTimeouts changes a binding's idle window and max age (nil leaves one as is).
func (s *Service) SetTimeouts(ctx context.Context, id string, idle, maxAge *time.Duration) (Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.idx.byID[id]
	if r == nil {
		return Record{}, fmt.Errorf("set timeouts %s: %w", id, ErrNotFound)
	}
	upd := *r
	if idle != nil {
		upd.IdleTimeout = *idle
	}
	if maxAge != nil {
		upd.MaxAge = *maxAge
	}
	if err := s.store.PutBindings(ctx, upd); err != nil {
		return Record{}, fmt.Errorf("set timeouts %s: %w", id, err)
	}
	s.writes++
	*r = upd
	delete(s.dirty, id)
	return upd, nil
}

// Unbind ends the selected active bindings with the reason and returns them.
func (s *Service) Unbind(ctx context.Context, in UnbindInput) ([]Record, error) {
	if in.Reason == "" {
		in.Reason = ReasonManual
	}
	now := s.clock.Now()
	s.mu.Lock()
	var targets []*Record
	switch {
	case in.ID != "":
		if r := s.idx.byID[in.ID]; r != nil {
			targets = append(targets, r)
		}
	case in.TargetSessionKey != "":
		for _, r := range s.idx.bySession[in.TargetSessionKey] {
			targets = append(targets, r)
		}
	}
	ended, err := s.endLocked(ctx, targets, func(*Record) string { return in.Reason }, now)
	s.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("unbind: %w", err)
	}
	for _, r := range ended {
		s.notify(r)
	}
	return ended, nil
}

func (s *Service) endLocked(ctx context.Context, targets []*Record, reason func(*Record) string, now time.Time) ([]Record, error) {
	if len(targets) == 0 {
		return nil, nil
	}
	ended := make([]Record, 0, len(targets))
	for _, r := range targets {
		ended = append(ended, endRecord(*r, reason(r), now))
	}
	if err := s.store.PutBindings(ctx, ended...); err != nil {
		return nil, err
	}
	s.writes++
	for _, r := range targets {
		s.unindex(r)
	}
	sortRecords(ended)
	return ended, nil
}

// Sweep ends every expired binding with reason idle-expired or
// max-age-expired and returns them.
//
// Expired candidates are first re-read from the store (Refresh), so
// activity another process recorded there keeps a binding alive; a failed
// re-read is logged and the local view is used.
func (s *Service) Sweep(ctx context.Context) ([]Record, error) {
	now := s.clock.Now()
	if ids := s.expiredIDs(now); len(ids) > 0 {
		if err := s.Refresh(ctx, ids...); err != nil {
			s.log.Warn().Err(err).Msg("binding sweep: re-read expired candidates")
		}
	}
	s.mu.Lock()
	var targets []*Record
	for _, r := range s.idx.byID {
		if r.ExpiryReason(now) != "" {
			targets = append(targets, r)
		}
	}
	ended, err := s.endLocked(ctx, targets, func(r *Record) string { return r.ExpiryReason(now) }, now)
	s.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("sweep bindings: %w", err)
	}
	for _, r := range ended {
		s.notify(r)
	}
	return ended, nil
}

// Flush persists activity recorded by Touch since the last flush.
func (s *Service) Flush(ctx context.Context) error {
	s.mu.Lock()
	if len(s.dirty) == 0 {
		s.mu.Unlock()
		return nil
	}
	recs := make([]Record, 0, len(s.dirty))
	for id := range s.dirty {
		if r := s.idx.byID[id]; r != nil {
			recs = append(recs, *r)
		}
	}
	s.dirty = map[string]struct{}{}
	s.mu.Unlock()
	if err := s.store.PutBindings(ctx, recs...); err != nil {
		s.mu.Lock()
		for _, r := range recs {
			s.dirty[r.ID] = struct{}{}
		}
		s.mu.Unlock()
		return fmt.Errorf("flush binding activity: %w", err)
	}
	return nil
}

func (s *Service) notify(r Record) {
	if s.onEnded != nil {
		s.onEnded(r)
	}
}

// Run sweeps expired bindings and flushes activity every interval until ctx
// ends, then flushes once more with a short bounded context.
func (s *Service) Run(ctx context.Context) error {
	t := time.NewTicker(s.opt.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			return s.Flush(fctx)
		case <-t.C:
			if _, err := s.Sweep(ctx); err != nil {
				s.log.Error().Err(err).Msg("binding sweep failed")
			}
			if err := s.Flush(ctx); err != nil {
				s.log.Error().Err(err).Msg("binding flush failed")
			}
		}
	}
}
