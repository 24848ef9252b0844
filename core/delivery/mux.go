package delivery

import (
	"errors"
	"fmt"

	"github.com/agentbot/agentbot/core/binding"
)

// ErrUnknownPlatform: no sender here posts to the destination's platform
// (its Target.Channel). Permanent: a dispatcher's error wraps it and ErrRejected.
var ErrUnknownPlatform = errors.New("no sender for the destination's platform")

// Dispatcher is a Sender that posts through the sender of each
// destination (core/platform's table). Outbound asks it for the destination's own sender
// wherever it needs more than Send: whether and how that destination shows
// live messages (LiveSender: its SplitLive has no destination to dispatch
// by, so a dispatcher cannot answer it for all of them).
type Dispatcher interface {
	SenderFor(target binding.ConversationRef) (Sender, error)
}

// maxDispatch bounds the chain of dispatchers Outbound follows (a
// dispatcher over dispatchers); a longer one is a wiring loop.
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
