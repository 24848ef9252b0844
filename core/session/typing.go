package session

import (
	"context"
	"sync"
	"time"

	"github.com/agentbot/agentbot/core/binding"
)

// Typist shows the platform's "is typing" indicator in a conversation. On
// Discord it lasts about 10 s unless renewed, and the bot's next message in
// the conversation ends it.
type Typist interface {
	Typing(ctx context.Context, conv binding.ConversationRef) error
}

// After returns a channel that receives once d has passed (time.After in
// production; tests inject one they fire by hand).
type After func(d time.Duration) <-chan time.Time

// DefaultTypingEvery renews the indicator before Discord's 10 s expire.
const DefaultTypingEvery = 8 * time.Second

// TypingGrace is how long work runs before its indicator shows: a quick
// answer needs none, and since one conversation's loops never overlap and
// each waits this long first, a conversation's typing calls are at least
// this far apart (within Discord's per-channel typing limit however fast
// its turns follow each other). Under DESIGN's "within 2 s".
const TypingGrace = time.Second

// typingLoop is one conversation's indicator, shared by every piece of
// work whose answer will appear there (a turn and a subagent's announce
// can overlap): one renewal loop per conversation keeps the calls within
// the platform's per-channel limit.
type typingLoop struct {
	holders int
	cancel  context.CancelFunc
	done    chan struct{}
}

// startTyping shows the typing indicator in conv until the returned stop
// is called (after TypingGrace, then every Options.TypingEvery). Call stop before
// posting the answer: the answer ends the indicator, and a renewal racing
// it would show "typing" again for 10 s after the answer.
func (m *Manager) startTyping(conv binding.ConversationRef) (stop func()) {
	conv = conv.Normalize()
	if m.d.Typist == nil || conv.ConversationID == "" {
		return func() {}
	}
	id := conv.ConversationID
	m.tmu.Lock()
	l := m.typing[id]
	if l == nil {
		ctx, cancel := context.WithCancel(context.WithoutCancel(m.baseCtx()))
		l = &typingLoop{cancel: cancel, done: make(chan struct{})}
		m.typing[id] = l
		go m.renewTyping(ctx, conv, l.done)
	}
	l.holders++
	m.tmu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			m.tmu.Lock()
			l.holders--
			last := l.holders == 0
			if last {
				delete(m.typing, id)
				l.cancel()
			}
			m.tmu.Unlock()
			if last {
				<-l.done // no renewal is in flight once the answer is posted
			}
		})
	}
}

func (m *Manager) renewTyping(ctx context.Context, conv binding.ConversationRef, done chan struct{}) {
	defer close(done)
	select {
	case <-ctx.Done():
		return
	case <-m.d.After(TypingGrace):
	}
	for {
		if err := m.d.Typist.Typing(ctx, conv); err != nil && ctx.Err() == nil {
			// Cosmetic: the answer still comes; say why the indicator did not.
			m.d.Log.Debug().Err(err).Str("conversation", conv.ConversationID).Msg("typing indicator")
		}
		select {
		case <-ctx.Done():
			return
		case <-m.d.After(m.opt.TypingEvery):
		}
	}
}
