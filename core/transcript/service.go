package transcript

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentbot/agentbot/core/clock"
)

// Service is the transcript API the rest of the bot uses. It stamps
// entries with the session's current generation and the time, makes Append
// idempotent on delivery ids, and serves History from the tail of the
// store without reading whole sessions.
type Service struct {
	store Store
	clock clock.Clock

	// resetMu orders Reset against Append so no entry is stamped with a
	// generation that a concurrent Reset has just retired.
	resetMu sync.RWMutex

	erasers []Eraser
}

// Options are a Service's settings. It has none yet; the type keeps the
// shape every component shares (New(Options, Deps)).
type Options struct{}

// Deps are what a Service works with.
type Deps struct {
	Store Store
	Clock clock.Clock // nil: the real clock
	// Erasers are what Delete calls after erasing the transcript's own
	// copy: the copies a deleted message's text has elsewhere. The outbox
	// eraser is the Outbound, which itself writes through this service:
	// the wiring gives an EraserFunc that reaches it once built.
	Erasers []Eraser
}

// New returns a transcript service over d.Store. It does no I/O.
func New(_ Options, d Deps) *Service {
	if d.Clock == nil {
		d.Clock = clock.Real{}
	}
	return &Service{store: d.Store, clock: d.Clock, erasers: d.Erasers}
}

// Append writes e to session key once. With a non-empty DeliveryID, a
// second Append with the same id and text returns the first entry; with
// different text it fails with ErrDeliveryConflict.
func (s *Service) Append(ctx context.Context, key string, e Entry) (Entry, error) {
	if key == "" {
		return Entry{}, fmt.Errorf("append: empty session key")
	}
	e.SessionKey = key
	if _, ok := s.store.(Resetter); !ok {
		// The store takes the caller's generation: stamp it here, ordered
		// against Reset by resetMu (one process owns such a store).
		s.resetMu.RLock()
		defer s.resetMu.RUnlock()
		gen, err := s.store.Generation(ctx, key)
		if err != nil {
			return Entry{}, fmt.Errorf("append to %s: %w", key, err)
		}
		e.Generation = gen
	}
	if e.At.IsZero() {
		e.At = s.clock.Now()
	}
	if e.MessageIDs == nil {
		e.MessageIDs = []string{}
	}
	stored, existed, err := s.store.Append(ctx, key, e)
	if err != nil {
		return Entry{}, fmt.Errorf("append to %s: %w", key, err)
	}
	if existed && stored.Text != e.Text {
		return stored, fmt.Errorf("append %s to %s: %w", e.DeliveryID, key, ErrDeliveryConflict)
	}
	return stored, nil
}

// History returns up to n of the newest entries of the session's current
// generation, oldest first: what the model sees. Change records are applied,
// not returned: an edited entry carries its latest text, a deleted one is
// left out (invariant 17). It reads only the tail: a window that change
// records or deleted entries thin out is widened until it holds n visible
// entries or reaches the generation's start.
func (s *Service) History(ctx context.Context, key string, n int) ([]Entry, error) {
	if n <= 0 {
		return nil, nil
	}
	gen, err := s.store.Generation(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("history of %s: %w", key, err)
	}
	for fetch := n; ; fetch *= 2 {
		tail, err := s.store.Tail(ctx, key, fetch)
		if err != nil {
			return nil, fmt.Errorf("history of %s: %w", key, err)
		}
		// Generations only grow, so the current one is a suffix of the tail.
		i := len(tail)
		for i > 0 && tail[i-1].Generation == gen {
			i--
		}
		visible := Visible(tail[i:])
		if len(visible) >= n || i > 0 || len(tail) < fetch {
			if len(visible) > n {
				visible = visible[len(visible)-n:]
			}
			return visible, nil
		}
	}
}

// Displayed returns up to n of the newest entries of the session that the
// chat still displays, oldest first, across generations (a /reset leaves
// the model's history, not the chat): what catch-up compares with the
// channel for changes made while the bot was down. Change records are
// applied as in History.
func (s *Service) Displayed(ctx context.Context, key string, n int) ([]Entry, error) {
	if n <= 0 {
		return nil, nil
	}
	for fetch := n; ; fetch *= 2 {
		tail, err := s.store.Tail(ctx, key, fetch)
		if err != nil {
			return nil, fmt.Errorf("displayed entries of %s: %w", key, err)
		}
		visible := Visible(tail)
		if len(visible) >= n || len(tail) < fetch {
			if len(visible) > n {
				visible = visible[len(visible)-n:]
			}
			return visible, nil
		}
	}
}

// Eraser erases copies of a deleted entry's text kept outside the
// transcript (the delivery outbox). It is called after the transcript's own
// copy is erased, with the entry as it was.
type Eraser interface {
	EraseEntry(ctx context.Context, e Entry) error
}

// EraserFunc is a function as an Eraser.
type EraserFunc func(ctx context.Context, e Entry) error

// EraseEntry calls f.
func (f EraserFunc) EraseEntry(ctx context.Context, e Entry) error { return f(ctx, e) }

// Locate finds the session whose transcript holds a Discord message id and
// that entry (the message's entry, never a change record).
func (s *Service) Locate(ctx context.Context, messageID string) (string, Entry, bool, error) {
	key, ok, err := s.store.LocateMessage(ctx, messageID)
	if err != nil || !ok {
		if err != nil {
			err = fmt.Errorf("locate message %s: %w", messageID, err)
		}
		return "", Entry{}, false, err
	}
	e, ok, err := s.ByMessageID(ctx, key, messageID)
	if err != nil || !ok {
		return "", Entry{}, false, err
	}
	return key, e, true, nil
}

// Edit records that the chat now shows text for messageID (an edit by the
// message's author): an edit record for the message's entry, keyed by the
// message id and editKey (the edit's timestamp), so a replayed event is
// written once. It reports false when no transcript holds the message, the
// text is unchanged, or the entry is deleted.
func (s *Service) Edit(ctx context.Context, messageID, editKey, text string) (bool, error) {
	key, target, ok, err := s.Locate(ctx, messageID)
	if err != nil || !ok || target.Deleted {
		return false, err
	}
	prefix := "edit:" + messageID + ":" + editKey + ":"
	cur, n, replayed, err := s.latestText(ctx, key, target, prefix, text)
	if err != nil {
		return false, err
	}
	if cur == text || replayed {
		// Nothing changed, or a replay: this edit (key and text) was
		// recorded already, maybe before later ones (a Matrix /sync handing
		// events again), and an older edit never shows over a newer one.
		return false, nil
	}
	// The count of earlier edits keeps two edits with one timestamp apart.
	_, err = s.Append(ctx, key, Entry{
		Role: target.Role, Author: target.Author, Text: text, Source: SourceEdit, Target: target.Seq,
		DeliveryID: prefix + strconv.Itoa(n), Meta: map[string]string{"messageId": messageID},
	})
	if err != nil && !errors.Is(err, ErrDeliveryConflict) {
		return false, fmt.Errorf("edit message %s: %w", messageID, err)
	}
	return err == nil, nil
}

// latestText is target's text after the edit records that follow it, how
// many there are, and whether one of them is the edit whose delivery ids
// start with prefix and whose text is edit.
func (s *Service) latestText(ctx context.Context, key string, target Entry, prefix, edit string) (string, int, bool, error) {
	text, n, seen := target.Text, 0, false
	err := s.changesOf(ctx, key, target.Seq, func(e Entry) {
		if e.Source == SourceEdit {
			text, n = e.Text, n+1
			seen = seen || (strings.HasPrefix(e.DeliveryID, prefix) && e.Text == edit)
		}
	})
	return text, n, seen, err
}

// changesOf calls f for each change record of session key that targets seq,
// in order. Records only follow their target, so it reads from seq on.
func (s *Service) changesOf(ctx context.Context, key string, seq uint64, f func(Entry)) error {
	const page = 256
	for from := seq + 1; ; {
		es, err := s.store.Range(ctx, key, from, page)
		if err != nil {
			return fmt.Errorf("changes of %s/%d: %w", key, seq, err)
		}
		for _, e := range es {
			if e.IsChange() && e.Target == seq {
				f(e)
			}
		}
		if len(es) < page {
			return nil
		}
		from = es[len(es)-1].Seq + 1
	}
}

// Delete records that messageID left the chat (deleted by anyone, or its
// thread or channel deleted): the entry's text and the text of its edit
// records are erased first, then the erasers run, then a deletion record is
// appended (keyed by the message id, so a replay writes nothing). A crash
// between the steps leaves the entry erased and marked Deleted, which
// History already leaves out; the next Delete of the same message finishes
// the rest. A split reply is one entry: deleting any of its parts deletes
// the entry (docs/DECISIONS.md). It reports false when no transcript holds
// the message.
func (s *Service) Delete(ctx context.Context, messageID string) (bool, error) {
	key, target, ok, err := s.Locate(ctx, messageID)
	if err != nil || !ok {
		return false, err
	}
	seqs := []uint64{target.Seq}
	if err := s.changesOf(ctx, key, target.Seq, func(e Entry) {
		if e.Source == SourceEdit {
			seqs = append(seqs, e.Seq)
		}
	}); err != nil {
		return false, err
	}
	if err := s.store.Erase(ctx, key, seqs); err != nil {
		return false, fmt.Errorf("erase message %s in %s: %w", messageID, key, err)
	}
	for _, er := range s.erasers {
		if err := er.EraseEntry(ctx, target); err != nil {
			return false, fmt.Errorf("erase copies of message %s: %w", messageID, err)
		}
	}
	if _, err := s.Append(ctx, key, Entry{
		Role: target.Role, Source: SourceDeletion, Target: target.Seq,
		DeliveryID: "delete:" + key + ":" + strconv.FormatUint(target.Seq, 10), Meta: map[string]string{"messageId": messageID},
	}); err != nil {
		return false, fmt.Errorf("delete message %s: %w", messageID, err)
	}
	return true, nil
}

// Reset starts a new generation: earlier entries stay in the record but
// leave the model's history. It returns the new generation.
func (s *Service) Reset(ctx context.Context, key string) (int, error) {
	if r, ok := s.store.(Resetter); ok {
		gen, err := r.ResetGeneration(ctx, key)
		if err != nil {
			return 0, fmt.Errorf("reset %s: %w", key, err)
		}
		return gen, nil
	}
	s.resetMu.Lock()
	defer s.resetMu.Unlock()
	gen, err := s.store.Generation(ctx, key)
	if err != nil {
		return 0, fmt.Errorf("reset %s: %w", key, err)
	}
	if err := s.store.SetGeneration(ctx, key, gen+1); err != nil {
		return 0, fmt.Errorf("reset %s: %w", key, err)
	}
	return gen + 1, nil
}

// Entries pages through every entry of a session, all generations.
func (s *Service) Entries(ctx context.Context, key string, from uint64, limit int) ([]Entry, error) {
	out, err := s.store.Range(ctx, key, from, limit)
	if err != nil {
		return nil, fmt.Errorf("entries of %s: %w", key, err)
	}
	return out, nil
}

// ByMessageID finds the entry that holds a Discord message id.
func (s *Service) ByMessageID(ctx context.Context, key, messageID string) (Entry, bool, error) {
	e, ok, err := s.store.ByMessageID(ctx, key, messageID)
	if err != nil {
		return Entry{}, false, fmt.Errorf("find message %s in %s: %w", messageID, key, err)
	}
	return e, ok, nil
}

// Sessions lists the session keys that have transcripts, sorted.
func (s *Service) Sessions(ctx context.Context) ([]string, error) {
	keys, err := s.store.Sessions(ctx)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	slices.Sort(keys)
	return keys, nil
}

// Exists reports whether the session has any entry.
func (s *Service) Exists(ctx context.Context, key string) (bool, error) {
	tail, err := s.store.Tail(ctx, key, 1)
	if err != nil {
		return false, fmt.Errorf("look up %s: %w", key, err)
	}
	return len(tail) > 0, nil
}

// DeleteConversation records that conversation convID (a thread or
// channel) left the chat with everything it displayed: each entry of the
// sessions keys whose messages it displayed (meta MetaDisplayedIn) is
// deleted as by Delete, by message id, in whichever of those sessions
// holds it (an ended binding's subagent included); an entry another
// conversation displays is never touched. Entries written before entries
// carried MetaDisplayedIn fall back to the route rule: those of
// legacyKey at or after legacySince. It returns how many entries it
// deleted.
func (s *Service) DeleteConversation(ctx context.Context, convID string, keys []string, legacyKey string, legacySince time.Time) (int, error) {
	const page = 256
	var ids []string
	for _, key := range slices.Compact(slices.Sorted(slices.Values(keys))) {
		if key == "" {
			continue
		}
		for from := uint64(1); ; {
			es, err := s.store.Range(ctx, key, from, page)
			if err != nil {
				return 0, fmt.Errorf("delete messages of %s: %w", convID, err)
			}
			for _, e := range es {
				if e.IsChange() || e.Deleted || len(e.MessageIDs) == 0 {
					continue
				}
				in, known := e.Meta[MetaDisplayedIn]
				if in == convID || (!known && key == legacyKey && !e.At.Before(legacySince)) {
					ids = append(ids, e.MessageIDs[0])
				}
			}
			if len(es) < page {
				break
			}
			from = es[len(es)-1].Seq + 1
		}
	}
	n := 0
	for _, id := range ids {
		ok, err := s.Delete(ctx, id)
		if err != nil {
			return n, err
		}
		if ok {
			n++
		}
	}
	return n, nil
}
