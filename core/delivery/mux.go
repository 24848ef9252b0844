package delivery

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/agentbot/agentbot/core/binding"
)

// ErrUnknownPlatform: no sender here posts to the destination's platform
// (its Target.Channel). Permanent: a Mux's error wraps it and ErrRejected.
var ErrUnknownPlatform = errors.New("no sender for the destination's platform")

// Dispatcher is a Sender that posts through the sender of each
// destination (Mux). Outbound asks it for the destination's own sender
// wherever it needs more than Send: whether and how that destination shows
// live messages (LiveSender: its SplitLive has no destination to dispatch
// by, so a dispatcher cannot answer it for all of them).
type Dispatcher interface {
	SenderFor(target binding.ConversationRef) (Sender, error)
}

// Mux is the Sender of a process that posts to several platforms: each
// delivery goes to the sender of its Target.Channel ("discord",
// "matrix"); a platform without one is a permanent failure
// (ErrUnknownPlatform), never a silent drop. Outbound reaches the
// destination's LiveSender through SenderFor (Dispatcher), so a live
// message on each platform is cut at that platform's limit.
type Mux struct {
	senders map[string]Sender
	names   string // the platforms, for error texts
}

var (
	_ Sender     = (*Mux)(nil)
	_ Dispatcher = (*Mux)(nil)
)

// NewMux returns a Mux over one sender per platform name, matched the way
// binding.ConversationRef.Normalize writes Channel (trimmed, lowercase).
// Nil senders are left out.
func NewMux(senders map[string]Sender) *Mux {
	m := &Mux{senders: make(map[string]Sender, len(senders))}
	for name, s := range senders {
		if s != nil {
			m.senders[binding.ConversationRef{Channel: name}.Normalize().Channel] = s
		}
	}
	m.names = strings.Join(slices.Sorted(maps.Keys(m.senders)), ", ")
	if m.names == "" {
		m.names = "none"
	}
	return m
}

// SenderFor returns the sender of target's platform.
func (m *Mux) SenderFor(target binding.ConversationRef) (Sender, error) {
	platform := target.Normalize().Channel
	if s, ok := m.senders[platform]; ok {
		return s, nil
	}
	return nil, fmt.Errorf("platform %q: %w (this process posts to: %s): %w", platform, ErrUnknownPlatform, m.names, ErrRejected)
}

// Send posts d with the sender of its destination's platform.
func (m *Mux) Send(ctx context.Context, d Delivery) (Receipt, error) {
	s, err := m.SenderFor(d.Target)
	if err != nil {
		return Receipt{}, fmt.Errorf("send %s: %w", d.ID, err)
	}
	return s.Send(ctx, d)
}

// maxDispatch bounds the chain of dispatchers Outbound follows (a Mux
// over Muxes); a longer one is a wiring loop.
const maxDispatch = 8

// senderFor returns the sender that posts deliveries to target: o.sender,
// or the one its dispatcher (and theirs) picks.
func (o *Outbound) senderFor(target binding.ConversationRef) (Sender, error) {
	s := o.sender
	for range maxDispatch {
		d, ok := s.(Dispatcher)
		if !ok {
			return s, nil
		}
		next, err := d.SenderFor(target)
		if err != nil {
			return nil, err
		}
		s = next
	}
	return nil, fmt.Errorf("sender for %q: more than %d dispatchers deep (a wiring loop?): %w", target.Normalize().Channel, maxDispatch, ErrRejected)
}

// liveSenderFor returns the LiveSender of target's sender, or why there is
// none (ErrNotLive, ErrUnknownPlatform).
func (o *Outbound) liveSenderFor(target binding.ConversationRef) (LiveSender, error) {
	s, err := o.senderFor(target)
	if err != nil {
		return nil, err
	}
	ls, ok := s.(LiveSender)
	if !ok {
		return nil, fmt.Errorf("platform %q: %w", target.Normalize().Channel, ErrNotLive)
	}
	return ls, nil
}

// LiveTo reports whether live messages can be shown at target (its
// platform's sender is a LiveSender). A caller that may stream (a turn's
// reply) sends whole where it cannot.
func (o *Outbound) LiveTo(target binding.ConversationRef) bool {
	_, err := o.liveSenderFor(target)
	return err == nil
}
