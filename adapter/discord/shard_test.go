package discord

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
)

func TestIdentifyDelay(t *testing.T) {
	t.Parallel()
	tests := []struct {
		shard, maxConcurrency int
		want                  time.Duration
	}{
		{0, 1, 0},
		{1, 1, 5 * time.Second},
		{3, 1, 15 * time.Second},
		{0, 16, 0},
		{15, 16, 0}, // same window: different rate-limit keys
		{16, 16, 5 * time.Second},
		{33, 16, 10 * time.Second},
		{2, 0, 10 * time.Second}, // a missing max_concurrency counts as 1
		{-1, 1, 0},
	}
	for _, tc := range tests {
		if got := identifyDelay(tc.shard, tc.maxConcurrency); got != tc.want {
			t.Errorf("identifyDelay(%d, %d) = %s, want %s", tc.shard, tc.maxConcurrency, got, tc.want)
		}
	}
}

func TestIdentifyBackoff(t *testing.T) {
	t.Parallel()
	tests := []struct {
		failures int
		want     time.Duration
	}{
		{-1, 0}, {0, 0}, {1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second},
		{7, 64 * time.Second}, {8, maxIdentifyBackoff}, {9, maxIdentifyBackoff}, {1000, maxIdentifyBackoff},
	}
	for _, tc := range tests {
		if got := identifyBackoff(tc.failures); got != tc.want {
			t.Errorf("identifyBackoff(%d) = %s, want %s", tc.failures, got, tc.want)
		}
	}
}

// sleeps records the waits connect asks for and returns at once; hook
// (optional) runs on each, e.g. to change the emulator's budget.
type sleeps struct {
	mu   sync.Mutex
	got  []time.Duration
	hook func(d time.Duration)
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	s.mu.Lock()
	s.got = append(s.got, d)
	hook := s.hook
	s.mu.Unlock()
	if hook != nil {
		hook(d)
	}
	return ctx.Err()
}

func (s *sleeps) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprint(s.got)
}

// connectTo builds an adapter on the emulator and runs connect; the session
// is closed at cleanup (after its first heartbeat, see the discordtest doc).
func connectTo(t *testing.T, e *discordtest.Emulator, token string, opt GatewayOptions, sl *sleeps) (*Gateway, error) {
	t.Helper()
	opt.Sleep = sl.sleep
	if token == "" {
		token = e.Token()
	}
	c, a := wire(t, ClientOptions{Token: token, APIURL: e.URL()}, ClientDeps{Log: zerolog.Nop()}, opt, GatewayDeps{Log: zerolog.Nop()})
	s := c.session()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	before := e.GatewayStats().Heartbeats
	if err := a.connect(ctx, s); err != nil {
		return a, err
	}
	if err := e.WaitHeartbeats(ctx, before+1); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return a, nil
}

func onlyShard(t *testing.T, e *discordtest.Emulator) [2]int {
	t.Helper()
	sh := e.SessionShards()
	if len(sh) != 1 {
		t.Fatalf("sessions %v, want one", sh)
	}
	for _, v := range sh {
		return v
	}
	return [2]int{}
}

func TestConnectShardAndPacing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		shards, maxCon int // emulator: recommended shards, max_concurrency
		opt            Shard
		wantShard      [2]int
		wantSleeps     string
	}{
		{"unsharded", 1, 1, Shard{}, [2]int{0, 1}, "[]"},
		{"shard 0 of 2 goes first", 1, 1, Shard{ID: 0, Count: 2}, [2]int{0, 2}, "[]"},
		{"shard 3 of 4 waits three windows", 1, 1, Shard{ID: 3, Count: 4}, [2]int{3, 4}, "[15s]"},
		{"shard 3 of 4 with max_concurrency 4 goes at once", 1, 4, Shard{ID: 3, Count: 4}, [2]int{3, 4}, "[]"},
		{"auto takes Discord's shard count", 3, 2, Shard{ID: 2, Auto: true}, [2]int{2, 3}, "[5s]"},
		{"auto unsharded", 1, 1, Shard{Auto: true}, [2]int{0, 1}, "[]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := discordtest.NewTest(t, discordtest.Options{Shards: tc.shards,
				SessionStartLimit: discordtest.SessionStartLimit{MaxConcurrency: tc.maxCon}})
			sl := &sleeps{}
			a, err := connectTo(t, e, "", GatewayOptions{Shard: tc.opt}, sl)
			if err != nil {
				t.Fatal(err)
			}
			if got := onlyShard(t, e); got != tc.wantShard {
				t.Errorf("identified as shard %v, want %v", got, tc.wantShard)
			}
			if id, n := a.ShardInfo(); id != tc.wantShard[0] || n != tc.wantShard[1] {
				t.Errorf("ShardInfo() = %d, %d", id, n)
			}
			if sl.String() != tc.wantSleeps {
				t.Errorf("waits %s, want %s", sl, tc.wantSleeps)
			}
			if a.IdentifyAttempts() != 1 || e.GatewayStats().Identifies != 1 {
				t.Errorf("%d attempts, %d identifies; want 1", a.IdentifyAttempts(), e.GatewayStats().Identifies)
			}
		})
	}
}

func TestConnectAutoShardIDBeyondRecommendation(t *testing.T) {
	t.Parallel()
	e := discordtest.NewTest(t, discordtest.Options{Shards: 2})
	_, err := connectTo(t, e, "", GatewayOptions{Shard: Shard{ID: 2, Auto: true}}, &sleeps{})
	if err == nil || !strings.Contains(err.Error(), "discord.shard.id 2 is not below the shard count Discord recommends (2)") {
		t.Fatalf("connect = %v", err)
	}
	if n := e.GatewayStats().Identifies; n != 0 {
		t.Errorf("%d identifies", n)
	}
}

// A spent identify budget: no IDENTIFY until reset_after has passed.
func TestConnectWaitsOutSpentBudget(t *testing.T) {
	t.Parallel()
	e := discordtest.NewTest(t, discordtest.Options{})
	e.SetSessionStartLimit(discordtest.SessionStartLimit{Total: 1000, Remaining: 0, ResetAfter: 3 * time.Hour, MaxConcurrency: 1})
	sl := &sleeps{}
	sl.hook = func(d time.Duration) {
		if n := e.GatewayStats().Identifies; n != 0 {
			t.Errorf("identified %d times with the budget spent", n)
		}
		e.SetSessionStartLimit(discordtest.SessionStartLimit{Total: 1000, Remaining: 1000, ResetAfter: 24 * time.Hour, MaxConcurrency: 1})
	}
	if _, err := connectTo(t, e, "", GatewayOptions{}, sl); err != nil {
		t.Fatal(err)
	}
	if sl.String() != "[3h0m0s]" {
		t.Errorf("waits %s, want [3h0m0s]", sl)
	}
	if n := e.GatewayStats().Identifies; n != 1 {
		t.Errorf("%d identifies, want 1", n)
	}
}

// Failed connects back off 1 s, 2 s, 4 s inside the process.
func TestConnectBacksOffAfterFailures(t *testing.T) {
	t.Parallel()
	e := discordtest.NewTest(t, discordtest.Options{})
	e.InjectFault(discordtest.Fault{Method: "GET", Path: "/gateway", Times: 3, Status: 500})
	sl := &sleeps{}
	a, err := connectTo(t, e, "", GatewayOptions{}, sl)
	if err != nil {
		t.Fatal(err)
	}
	if sl.String() != "[1s 2s 4s]" {
		t.Errorf("waits %s, want [1s 2s 4s]", sl)
	}
	if a.IdentifyAttempts() != 4 || e.GatewayStats().Identifies != 1 {
		t.Errorf("%d attempts, %d identifies; want 4 and 1", a.IdentifyAttempts(), e.GatewayStats().Identifies)
	}
}

func TestConnectStopsOnFatalCloseAndOnCancel(t *testing.T) {
	t.Parallel()
	e := discordtest.NewTest(t, discordtest.Options{})
	sl := &sleeps{}
	_, err := connectTo(t, e, "wrong-token", GatewayOptions{}, sl)
	if err == nil || !strings.Contains(err.Error(), "4004") {
		t.Fatalf("connect with a bad token = %v, want the 4004 close", err)
	}
	if sl.String() != "[]" {
		t.Errorf("waits %s: a fatal close must not be retried", sl)
	}

	// A cancelled context ends the backoff loop.
	e.InjectFault(discordtest.Fault{Method: "GET", Path: "/gateway", Times: -1, Status: 500})
	ctx, cancel := context.WithCancel(context.Background())
	c, a := wire(t, ClientOptions{Token: e.Token(), APIURL: e.URL()}, ClientDeps{Log: zerolog.Nop()},
		GatewayOptions{Sleep: func(ctx context.Context, d time.Duration) error { cancel(); return ctx.Err() }}, GatewayDeps{Log: zerolog.Nop()})
	s := c.session()
	if err := a.connect(ctx, s); err != context.Canceled {
		t.Fatalf("connect after cancel = %v", err)
	}
}
