// Package platform is the table of the chat platforms one process serves
// ("discord", "matrix"): per platform its sender, permission directory,
// thread maker, typing indicator, command wording and places (where a
// conversation sits, for agents[].channels), filled once at wiring. The
// core asks it by conversation (binding.ConversationRef's Channel): the
// Table is the Sender Outbound posts with, the Directory the authority
// asks, the Threads and the Typist the sessions use, the Locator the agent
// routes ask.
//
// Invariants (tests in this package):
//   - A conversation is served by its own platform only: a platform the
//     table lacks, or a part a platform lacks, is a permanent refusal
//     (delivery.ErrUnknownPlatform, authz.ErrNoDirectory, a thread refused
//     with delivery.ErrRejected), never a fallback to another platform.
//   - A platform without a typing indicator shows none (no error).
//   - Names are matched the way binding.ConversationRef.Normalize writes
//     Channel (trimmed, lowercase).
package platform

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/agentbot/agentbot/core/agentroute"
	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/command"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/notes"
	"github.com/agentbot/agentbot/core/session"
)

// Platform is one chat platform's parts. Sender and Directory are needed
// to serve it; Threads and Typist may be nil.
type Platform struct {
	Name      string // binding.ConversationRef.Channel of its conversations
	Sender    delivery.Sender
	Directory authz.Directory
	Threads   session.Threads // nil: no threads there
	Typist    session.Typist  // nil: no typing indicator there
	// Deleter deletes the bot's messages there (a forgotten note); nil:
	// the platform's messages cannot be deleted by the core.
	Deleter notes.Deleter
	// Commands is how command texts and job hints are worded there.
	Commands command.Platform
	// Locator says where its conversations sit (category, server) for
	// agents[].channels; nil: matched by their own ids (Matrix rooms).
	Locator agentroute.Locator
}

// Table is the platforms of a process, by name.
type Table struct {
	byName map[string]Platform
	names  string // the platforms, for error texts
}

var (
	_ delivery.Sender     = (*Table)(nil)
	_ delivery.Dispatcher = (*Table)(nil)
	_ authz.Directory     = (*Table)(nil)
	_ session.Threads     = (*Table)(nil)
	_ session.Typist      = (*Table)(nil)
	_ notes.Deleter       = (*Table)(nil)
	_ agentroute.Locator  = (*Table)(nil)
)

// New returns the table of ps; a later platform of the same name replaces
// an earlier one.
func New(ps ...Platform) *Table {
	t := &Table{byName: make(map[string]Platform, len(ps))}
	for _, p := range ps {
		p.Name = name(p.Name)
		t.byName[p.Name] = p
	}
	t.names = strings.Join(slices.Sorted(maps.Keys(t.byName)), ", ")
	if t.names == "" {
		t.names = "none"
	}
	return t
}

func name(channel string) string {
	return binding.ConversationRef{Channel: channel}.Normalize().Channel
}

// Of returns the platform of conv.
func (t *Table) Of(conv binding.ConversationRef) (Platform, bool) {
	p, ok := t.byName[conv.Normalize().Channel]
	return p, ok
}

// All returns the platforms, by name.
func (t *Table) All() []Platform {
	out := make([]Platform, 0, len(t.byName))
	for _, n := range slices.Sorted(maps.Keys(t.byName)) {
		out = append(out, t.byName[n])
	}
	return out
}

// SenderFor returns the sender of target's platform (delivery.Dispatcher).
func (t *Table) SenderFor(target binding.ConversationRef) (delivery.Sender, error) {
	if p, ok := t.Of(target); ok && p.Sender != nil {
		return p.Sender, nil
	}
	return nil, fmt.Errorf("platform %q: %w (this process posts to: %s): %w", target.Normalize().Channel, delivery.ErrUnknownPlatform, t.senders(), delivery.ErrRejected)
}

func (t *Table) senders() string {
	var names []string
	for _, p := range t.All() {
		if p.Sender != nil {
			names = append(names, p.Name)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// Send posts d with the sender of its destination's platform.
func (t *Table) Send(ctx context.Context, d delivery.Delivery) (delivery.Receipt, error) {
	s, err := t.SenderFor(d.Target)
	if err != nil {
		return delivery.Receipt{}, fmt.Errorf("send %s: %w", d.ID, err)
	}
	return s.Send(ctx, d)
}

// directory returns the directory of conv's platform. A user id is asked
// about only on the platform of the conversation: a Discord user has no
// standing in a Matrix room unless Matrix's directory says so.
func (t *Table) directory(conv binding.ConversationRef) (authz.Directory, error) {
	if p, ok := t.Of(conv); ok && p.Directory != nil {
		return p.Directory, nil
	}
	return nil, fmt.Errorf("platform %q (directories: %s): %w", conv.Normalize().Channel, t.names, authz.ErrNoDirectory)
}

// Access asks the directory of conv's platform.
func (t *Table) Access(ctx context.Context, userID string, conv binding.ConversationRef) (authz.Access, error) {
	d, err := t.directory(conv)
	if err != nil {
		return authz.Access{}, err
	}
	return d.Access(ctx, userID, conv)
}

// Member asks the directory of conv's platform.
func (t *Table) Member(ctx context.Context, userID string, conv binding.ConversationRef) (authz.Member, bool, error) {
	d, err := t.directory(conv)
	if err != nil {
		return authz.Member{}, false, err
	}
	return d.Member(ctx, userID, conv)
}

// CreateThread creates the thread on parent's platform; a platform
// without threads refuses with delivery.ErrRejected (permanent: the spawn
// fails closed).
func (t *Table) CreateThread(ctx context.Context, parent binding.ConversationRef, name string) (binding.ConversationRef, error) {
	p, ok := t.Of(parent)
	if !ok || p.Threads == nil {
		return binding.ConversationRef{}, fmt.Errorf("create thread on %q: no thread support for that platform: %w", parent.Normalize().Channel, delivery.ErrRejected)
	}
	return p.Threads.CreateThread(ctx, parent, name)
}

// Typing shows the indicator in conv, if its platform has one.
func (t *Table) Typing(ctx context.Context, conv binding.ConversationRef) error {
	if p, ok := t.Of(conv); ok && p.Typist != nil {
		return p.Typist.Typing(ctx, conv)
	}
	return nil
}

// DeleteMessage deletes a bot message in conv on conv's platform; a
// platform without deletion refuses with delivery.ErrRejected.
func (t *Table) DeleteMessage(ctx context.Context, conv binding.ConversationRef, messageID string) error {
	p, ok := t.Of(conv)
	if !ok || p.Deleter == nil {
		return fmt.Errorf("delete message on %q: this process cannot delete messages there: %w", conv.Normalize().Channel, delivery.ErrRejected)
	}
	return p.Deleter.DeleteMessage(ctx, conv, messageID)
}

// Place asks the Locator of conv's platform where conv sits; a platform
// without one, or one the table lacks, knows nothing (the zero Place).
func (t *Table) Place(conv binding.ConversationRef) agentroute.Place {
	if p, ok := t.Of(conv); ok && p.Locator != nil {
		return p.Locator.Place(conv)
	}
	return agentroute.Place{}
}
