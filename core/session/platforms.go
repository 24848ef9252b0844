package session

import (
	"context"
	"fmt"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
)

// ThreadsByPlatform is the Threads of a process on several platforms: a
// thread is created on the platform of its parent conversation
// (binding.ConversationRef.Channel). A platform without Threads refuses
// with delivery.ErrRejected (permanent: the spawn fails closed, never
// falls back to another platform).
type ThreadsByPlatform map[string]Threads

var _ Threads = ThreadsByPlatform(nil)

// CreateThread creates the thread on parent's platform.
func (p ThreadsByPlatform) CreateThread(ctx context.Context, parent binding.ConversationRef, name string) (binding.ConversationRef, error) {
	t, ok := p[parent.Normalize().Channel]
	if !ok || t == nil {
		return binding.ConversationRef{}, fmt.Errorf("create thread on %q: no thread support for that platform: %w", parent.Normalize().Channel, delivery.ErrRejected)
	}
	return t.CreateThread(ctx, parent, name)
}

// TypistsByPlatform is the Typist of a process on several platforms: the
// indicator is shown on the conversation's platform; a platform without
// one shows none.
type TypistsByPlatform map[string]Typist

var _ Typist = TypistsByPlatform(nil)

// Typing shows the indicator in conv, if its platform has one.
func (p TypistsByPlatform) Typing(ctx context.Context, conv binding.ConversationRef) error {
	if t, ok := p[conv.Normalize().Channel]; ok && t != nil {
		return t.Typing(ctx, conv)
	}
	return nil
}
