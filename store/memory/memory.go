package memory

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/transcript"
)

// Compile-time guards.
var (
	_ binding.Store    = (*Store)(nil)
	_ transcript.Store = (*Store)(nil)
	_ delivery.Store   = (*Store)(nil)
)

// Store is an in-memory store; the zero value is not usable, call New.
type Store struct {
	mu             sync.RWMutex
	bindings       map[string]binding.Record
	sessions       map[string]*session
	messageSession map[string]string // Discord message id -> first session key holding it
	deliveries     map[string]delivery.Record
	sched          schedState  // scheduler.Store (jobs.go); zero value ready
	changes        changeQueue // recall.Feed (changes.go)
	use            Usage       // usage.Store (usage.go); written with entries
}

type session struct {
	entries    []transcript.Entry // entries[i].Seq == i+1
	byDelivery map[string]uint64
	byMessage  map[string]uint64
	generation int
}

// New returns an empty store.
func New() *Store {
	return &Store{
		bindings:       make(map[string]binding.Record),
		sessions:       make(map[string]*session),
		messageSession: map[string]string{},
		deliveries:     make(map[string]delivery.Record),
	}
}

func ctxErr(ctx context.Context) error {
	if ctx == nil {
		return nil
	}
	return ctx.Err()
}

// ---- binding.Store ----

// PutBindings inserts or replaces the records atomically; a record with an
// empty ID fails the whole call.
func (s *Store) PutBindings(ctx context.Context, recs ...binding.Record) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	for _, r := range recs {
		if strings.TrimSpace(r.ID) == "" {
			return errors.New("memory: binding with empty id")
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range recs {
		s.bindings[r.ID] = copyBinding(r)
	}
	return nil
}

// Bindings returns every stored record, ordered by ID.
func (s *Store) Bindings(ctx context.Context) ([]binding.Record, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]binding.Record, 0, len(s.bindings))
	for _, r := range s.bindings {
		out = append(out, copyBinding(r))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func copyBinding(r binding.Record) binding.Record {
	r.Metadata = copyMap(r.Metadata)
	r.BoundAt = r.BoundAt.Round(0)
	r.LastActivityAt = r.LastActivityAt.Round(0)
	r.EndedAt = r.EndedAt.Round(0)
	return r
}

// ---- transcript.Store ----

// Append stores e in session key with the next seq; see transcript.Store.
func (s *Store) Append(ctx context.Context, key string, e transcript.Entry) (transcript.Entry, bool, error) {
	if err := ctxErr(ctx); err != nil {
		return transcript.Entry{}, false, err
	}
	if key == "" {
		return transcript.Entry{}, false, errors.New("memory: empty session key")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.sessions[key]
	if ss == nil {
		ss = newSession()
		s.sessions[key] = ss
	}
	if e.DeliveryID != "" {
		if seq, ok := ss.byDelivery[e.DeliveryID]; ok {
			return copyEntry(ss.entries[seq-1]), true, nil
		}
	}
	calls := e.Calls
	e = transcript.ForStore(key, e)
	e.At = e.At.Round(0)
	e.Seq = uint64(len(ss.entries)) + 1
	ss.entries = append(ss.entries, e)
	s.use.add(calls...) // with the entry, under the same lock
	s.changes.add(key, e.Seq)
	if e.DeliveryID != "" {
		ss.byDelivery[e.DeliveryID] = e.Seq
	}
	for _, id := range e.MessageIDs {
		if _, ok := ss.byMessage[id]; !ok {
			ss.byMessage[id] = e.Seq
		}
		if _, ok := s.messageSession[id]; !ok && id != "" {
			s.messageSession[id] = key
		}
	}
	return copyEntry(e), false, nil
}

func newSession() *session {
	return &session{byDelivery: map[string]uint64{}, byMessage: map[string]uint64{}}
}

// Tail returns up to n of the newest entries, oldest first.
func (s *Store) Tail(ctx context.Context, key string, n int) ([]transcript.Entry, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	ss := s.sessions[key]
	if ss == nil || n <= 0 {
		return []transcript.Entry{}, nil
	}
	start := max(len(ss.entries)-n, 0)
	return copyEntries(ss.entries[start:]), nil
}

// Range returns up to limit entries with Seq >= from (limit <= 0: no limit).
func (s *Store) Range(ctx context.Context, key string, from uint64, limit int) ([]transcript.Entry, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	ss := s.sessions[key]
	if ss == nil {
		return []transcript.Entry{}, nil
	}
	start := uint64(0)
	if from > 1 {
		start = from - 1
	}
	if start >= uint64(len(ss.entries)) {
		return []transcript.Entry{}, nil
	}
	es := ss.entries[start:]
	if limit > 0 && len(es) > limit {
		es = es[:limit]
	}
	return copyEntries(es), nil
}

// ByMessageID finds the entry holding messageID.
func (s *Store) ByMessageID(ctx context.Context, key, messageID string) (transcript.Entry, bool, error) {
	if err := ctxErr(ctx); err != nil {
		return transcript.Entry{}, false, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	ss := s.sessions[key]
	if ss == nil {
		return transcript.Entry{}, false, nil
	}
	seq, ok := ss.byMessage[messageID]
	if !ok {
		return transcript.Entry{}, false, nil
	}
	return copyEntry(ss.entries[seq-1]), true, nil
}

// LocateMessage finds the first session (by first write) that holds messageID.
func (s *Store) LocateMessage(ctx context.Context, messageID string) (string, bool, error) {
	if err := ctxErr(ctx); err != nil {
		return "", false, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	key, ok := s.messageSession[messageID]
	return key, ok, nil
}

// Erase empties the text of entries seqs of session key and marks them Deleted.
func (s *Store) Erase(ctx context.Context, key string, seqs []uint64) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.sessions[key]
	if ss == nil {
		return nil
	}
	for _, seq := range seqs {
		if seq == 0 || seq > uint64(len(ss.entries)) {
			continue
		}
		ss.entries[seq-1].Text = ""
		ss.entries[seq-1].Deleted = true
		s.changes.add(key, seq)
	}
	return nil
}

// Generation returns the session's generation (0 if never set).
func (s *Store) Generation(ctx context.Context, key string) (int, error) {
	if err := ctxErr(ctx); err != nil {
		return 0, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if ss := s.sessions[key]; ss != nil {
		return ss.generation, nil
	}
	return 0, nil
}

// SetGeneration records gen as the session's current generation.
func (s *Store) SetGeneration(ctx context.Context, key string, gen int) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	if key == "" {
		return errors.New("memory: empty session key")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.sessions[key]
	if ss == nil {
		ss = newSession()
		s.sessions[key] = ss
	}
	ss.generation = gen
	return nil
}

// Sessions lists the session keys with a transcript, sorted.
func (s *Store) Sessions(ctx context.Context) ([]string, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	keys := slices.Collect(maps.Keys(s.sessions))
	slices.Sort(keys)
	if keys == nil {
		keys = []string{}
	}
	return keys, nil
}

func copyEntry(e transcript.Entry) transcript.Entry {
	ids := make([]string, len(e.MessageIDs))
	copy(ids, e.MessageIDs)
	e.MessageIDs = ids
	e.Meta = copyMap(e.Meta)
	e.At = e.At.Round(0)
	return e
}

func copyEntries(es []transcript.Entry) []transcript.Entry {
	out := make([]transcript.Entry, len(es))
	for i, e := range es {
		out[i] = copyEntry(e)
	}
	return out
}

// ---- delivery.Store ----

// PutDelivery inserts or replaces r by r.Delivery.ID.
func (s *Store) PutDelivery(ctx context.Context, r delivery.Record) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	if strings.TrimSpace(r.Delivery.ID) == "" {
		return errors.New("memory: delivery with empty id")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deliveries[r.Delivery.ID] = copyDelivery(r)
	return nil
}

// GetDelivery returns the record for id.
func (s *Store) GetDelivery(ctx context.Context, id string) (delivery.Record, bool, error) {
	if err := ctxErr(ctx); err != nil {
		return delivery.Record{}, false, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.deliveries[id]
	if !ok {
		return delivery.Record{}, false, nil
	}
	return copyDelivery(r), true, nil
}

// Deliveries returns records in state ("" for all), newest CreatedAt first
// (ties: higher ID first), at most limit (0 = no limit).
func (s *Store) Deliveries(ctx context.Context, state delivery.PendingState, limit int) ([]delivery.Record, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []delivery.Record{}
	for _, r := range s.deliveries {
		if state == "" || r.State == state {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if c := out[i].CreatedAt.Compare(out[j].CreatedAt); c != 0 {
			return c > 0
		}
		return out[i].Delivery.ID > out[j].Delivery.ID
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	for i := range out {
		out[i] = copyDelivery(out[i])
	}
	return out, nil
}

func copyDelivery(r delivery.Record) delivery.Record {
	r.Delivery.Producer.Meta = copyMap(r.Delivery.Producer.Meta)
	if len(r.MessageIDs) == 0 {
		r.MessageIDs = nil
	} else {
		r.MessageIDs = slices.Clone(r.MessageIDs)
	}
	if len(r.LiveParts) == 0 {
		r.LiveParts = nil
	} else {
		r.LiveParts = slices.Clone(r.LiveParts)
	}
	r.CreatedAt = r.CreatedAt.Round(0)
	r.UpdatedAt = r.UpdatedAt.Round(0)
	return r
}

func copyMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return maps.Clone(m)
}
