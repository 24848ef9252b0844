package discord

import (
	"context"
	"slices"
	"sync"
	"testing"
)

// Defect 16 (issue 12): work queued for one conversation waits only for
// that conversation; each conversation's work runs in arrival order; close
// and wait let queued work finish.
func TestEventLanesOrderedPerConversation(t *testing.T) {
	_, a := wire(t, ClientOptions{}, ClientDeps{}, GatewayOptions{}, GatewayDeps{})
	a.events = a.newLanes()
	blocked := make(chan struct{})
	release := make(chan struct{})
	a.push("stuck", "first", func(context.Context) { close(blocked); <-release })
	<-blocked
	var mu sync.Mutex
	var got []string
	record := func(s string) func(context.Context) {
		return func(context.Context) { mu.Lock(); got = append(got, s); mu.Unlock() }
	}
	a.push("stuck", "second", record("stuck-2"))
	done := make(chan struct{})
	for _, s := range []string{"calm-1", "calm-2", "calm-3"} {
		a.push("calm", s, record(s))
	}
	a.push("calm", "done", func(context.Context) { close(done) })
	<-done // would hang if the calm conversation waited behind the stuck one
	mu.Lock()
	if want := []string{"calm-1", "calm-2", "calm-3"}; !slices.Equal(got, want) {
		t.Fatalf("ran %v while the other conversation was stuck, want %v", got, want)
	}
	mu.Unlock()
	a.events.Close()
	close(release)
	if err := a.events.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got[len(got)-1] != "stuck-2" {
		t.Fatalf("queued work after close did not run: %v", got)
	}
}
