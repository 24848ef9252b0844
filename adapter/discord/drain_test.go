package discord

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/rs/zerolog"
)

// TestDrainRacesInteractions drives drain and a stream of interactions at
// once (issue 20: goTracked's WaitGroup.Add raced drain's Wait; -race
// reported it). Work accepted before drain finishes before drain returns;
// work offered after it is refused.
func TestDrainRacesInteractions(t *testing.T) {
	for round := range 50 {
		_, a := wire(t, ClientOptions{}, ClientDeps{}, GatewayOptions{DrainTimeout: 10 * time.Second}, GatewayDeps{Log: zerolog.Nop()})
		a.events = a.newLanes()
		var started, finished atomic.Int64
		var offering sync.WaitGroup
		stop := make(chan struct{})
		for range 4 {
			offering.Add(1)
			go func() {
				defer offering.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					a.goTracked("interaction_create", func(context.Context) {
						started.Add(1)
						for range 50 { // some work, so drain usually finds a unit in flight
							runtime.Gosched()
						}
						finished.Add(1)
					})
				}
			}()
		}
		if err := a.drain(); err != nil {
			t.Fatalf("round %d: drain: %v", round, err)
		}
		atStop := finished.Load()
		if s := started.Load(); s != atStop {
			t.Fatalf("round %d: drain returned with %d accepted units unfinished", round, s-atStop)
		}
		close(stop)
		offering.Wait()
		if got := finished.Load(); got != atStop {
			t.Fatalf("round %d: %d units ran after drain returned", round, got-atStop)
		}
		if a.goTracked("interaction_create", func(context.Context) { t.Error("ran after drain") }) {
			t.Fatalf("round %d: goTracked accepted work after drain", round)
		}
	}
}

// An interaction refused while stopping still gets an ephemeral answer
// inside its 3 s window, never silence that Discord shows as a failure.
func TestInteractionWhileStoppingIsAnsweredEphemerally(t *testing.T) {
	f := newFakeDiscord(t)
	_, a := wire(t, ClientOptions{Token: "tok", APIURL: f.srv.URL}, ClientDeps{Log: zerolog.Nop()}, GatewayOptions{}, GatewayDeps{Log: zerolog.Nop()})
	a.events = a.newLanes()
	if err := a.drain(); err != nil {
		t.Fatal(err)
	}
	before := f.count()
	id := strconv.FormatInt((time.Now().UnixMilli()-1420070400000)<<22, 10)
	a.refuseStopping(&discordgo.Interaction{ID: id, Token: "itok", Type: discordgo.InteractionApplicationCommand})
	reqs := f.since(before)
	if len(reqs) != 1 || !strings.HasPrefix(reqs[0].path, "/api/v9/interactions/"+id+"/") {
		t.Fatalf("requests after refusal = %+v, want one interaction callback", reqs)
	}
	// Past the window nothing is sent (Discord would answer 10062).
	old := strconv.FormatInt((time.Now().Add(-4*time.Second).UnixMilli()-1420070400000)<<22, 10)
	a.refuseStopping(&discordgo.Interaction{ID: old, Token: "itok", Type: discordgo.InteractionApplicationCommand})
	if n := len(f.since(before)); n != 1 {
		t.Fatalf("a refusal past the 3 s window sent a request (%d requests)", n)
	}
}
