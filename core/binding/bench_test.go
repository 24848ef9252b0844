package binding_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/clock"
)

// BenchmarkResolveByConversation100k: target ≤ 300 ns/op, 0 allocs/op.
func BenchmarkResolveByConversation100k(b *testing.B) { benchResolve(b, 100_000) }

// BenchmarkResolveByConversation100kRandom looks conversations up in a
// random order (no help from sequential memory access).
func BenchmarkResolveByConversation100kRandom(b *testing.B) { benchResolveOrder(b, 100_000, true) }

// BenchmarkResolveByConversation1k is the same lookup with a cache-resident index, for comparison.
func BenchmarkResolveByConversation1k(b *testing.B) { benchResolve(b, 1000) }

func benchResolve(b *testing.B, n int) { benchResolveOrder(b, n, false) }

func benchResolveOrder(b *testing.B, n int, shuffle bool) {
	st := newFakeStore()
	s := binding.New(binding.Options{}, binding.Deps{Store: st, Clock: clock.NewFake(t0), Log: zerolog.Nop()})
	ctx := context.Background()
	refs := make([]binding.ConversationRef, n)
	for i := range refs {
		refs[i] = binding.ConversationRef{Channel: "discord", AccountID: "bot", ConversationID: strconv.Itoa(1_000_000_000_000_000 + i)}
		if _, err := s.Bind(ctx, binding.BindInput{TargetSessionKey: "agent:main:subagent:" + strconv.Itoa(i), Conversation: refs[i]}); err != nil {
			b.Fatal(err)
		}
	}
	if shuffle {
		rand.New(rand.NewPCG(1, 2)).Shuffle(len(refs), func(i, j int) { refs[i], refs[j] = refs[j], refs[i] })
	}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		if _, ok := s.ResolveByConversation(refs[i%n]); !ok {
			b.Fatal("miss")
		}
		i++
	}
}
