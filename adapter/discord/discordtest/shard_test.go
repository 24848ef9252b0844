package discordtest_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
)

func TestGuildShard(t *testing.T) {
	t.Parallel()
	tests := []struct {
		id    string
		count int
		want  int
	}{
		{"0", 1, 0},
		{"41771983423143937", 1, 0}, // unsharded: always 0
		{strconv.FormatUint(5<<22, 10), 2, 1},
		{strconv.FormatUint(5<<22|123, 10), 2, 1}, // low bits do not matter
		{strconv.FormatUint(6<<22, 10), 4, 2},
		{"not-a-snowflake", 2, 0},
	}
	for _, tc := range tests {
		if got := discordtest.GuildShard(tc.id, tc.count); got != tc.want {
			t.Errorf("GuildShard(%s, %d) = %d, want %d", tc.id, tc.count, got, tc.want)
		}
	}
}

func TestAddGuildOnShard(t *testing.T) {
	t.Parallel()
	e := discordtest.NewTest(t, discordtest.Options{})
	var last uint64
	for i, want := range []struct{ shard, count int }{{1, 2}, {0, 2}, {0, 2}, {3, 4}, {2, 3}, {0, 1}} {
		g := e.AddGuildOnShard(fmt.Sprint("g", i), want.shard, want.count)
		if got := discordtest.GuildShard(g.ID, want.count); got != want.shard {
			t.Errorf("guild %s is on shard %d of %d, want %d", g.ID, got, want.count, want.shard)
		}
		id, _ := strconv.ParseUint(g.ID, 10, 64)
		if id <= last {
			t.Errorf("guild id %d not after %d", id, last)
		}
		last = id
		// Ids made afterwards still increase.
		ch, err := e.AddTextChannel(g.ID, "c")
		must(t, err)
		if cid, _ := strconv.ParseUint(ch.ID, 10, 64); cid <= id {
			t.Errorf("channel id %d not after guild id %d", cid, id)
		}
	}
}

// shardRecorder collects, in gateway order (SyncEvents), what one session saw.
type shardRecorder struct {
	mu       sync.Mutex
	guilds   []string // GUILD_CREATE ids
	channels []string // MESSAGE_CREATE channel ids
	inter    []string // INTERACTION_CREATE channel ids
	threads  []string // THREAD_CREATE ids
	seen     chan string
}

func openShard(t *testing.T, e *discordtest.Emulator, id, count int) *shardRecorder {
	t.Helper()
	r := &shardRecorder{seen: make(chan string, 64)}
	openSession(t, e, func(s *discordgo.Session) {
		s.ShardID, s.ShardCount = id, count
		s.SyncEvents = true
		s.AddHandler(func(_ *discordgo.Session, g *discordgo.GuildCreate) {
			r.mu.Lock()
			r.guilds = append(r.guilds, g.ID)
			r.mu.Unlock()
		})
		s.AddHandler(func(_ *discordgo.Session, m *discordgo.MessageCreate) {
			r.mu.Lock()
			r.channels = append(r.channels, m.ChannelID)
			r.mu.Unlock()
			r.seen <- m.Content
		})
		s.AddHandler(func(_ *discordgo.Session, i *discordgo.InteractionCreate) {
			r.mu.Lock()
			r.inter = append(r.inter, i.ChannelID)
			r.mu.Unlock()
		})
		s.AddHandler(func(_ *discordgo.Session, c *discordgo.ThreadCreate) {
			r.mu.Lock()
			r.threads = append(r.threads, c.ID)
			r.mu.Unlock()
		})
	})
	return r
}

// waitSeen blocks until the session saw a message with content want (events are in order, so all
// earlier events were handled too).
func (r *shardRecorder) waitSeen(t *testing.T, want string) {
	t.Helper()
	ctx := ctxT(t)
	for {
		select {
		case got := <-r.seen:
			if got == want {
				return
			}
		case <-ctx.Done():
			t.Fatalf("session never saw %q", want)
		}
	}
}

func TestShardRouting(t *testing.T) {
	t.Parallel()
	e := discordtest.NewTest(t, discordtest.Options{Shards: 2})
	g0 := e.AddGuildOnShard("zero", 0, 2)
	g1 := e.AddGuildOnShard("one", 1, 2)
	ch0, err := e.AddTextChannel(g0.ID, "general")
	must(t, err)
	ch1, err := e.AddTextChannel(g1.ID, "general")
	must(t, err)
	alice, err := e.AddMember(g0.ID, "alice")
	must(t, err)
	bob, err := e.AddMember(g1.ID, "bob")
	must(t, err)
	// A global command both guilds can invoke.
	_, err = restSession(t, e).ApplicationCommandBulkOverwrite(e.ApplicationID(), "",
		[]*discordgo.ApplicationCommand{{Name: "ping", Description: "Ping."}})
	must(t, err)

	s0 := openShard(t, e, 0, 2)
	s1 := openShard(t, e, 1, 2)
	shards := map[[2]int]int{}
	for _, sh := range e.SessionShards() {
		shards[sh]++
	}
	if shards[[2]int{0, 2}] != 1 || shards[[2]int{1, 2}] != 1 {
		t.Fatalf("session shards = %v", e.SessionShards())
	}

	// Events after connect: a thread, an interaction and a message in each guild, then a DM.
	th0, err := e.AddThread(ch0.ID, "t0", alice.ID)
	must(t, err)
	th1, err := e.AddThread(ch1.ID, "t1", bob.ID)
	must(t, err)
	_, err = e.InvokeCommand(ch0.ID, alice.ID, "ping")
	must(t, err)
	_, err = e.InvokeCommand(ch1.ID, bob.ID, "ping")
	must(t, err)
	_, err = e.UserSay(ch0.ID, alice.ID, "in zero")
	must(t, err)
	_, err = e.UserSay(ch1.ID, bob.ID, "in one")
	must(t, err)
	dm, err := e.UserDM(bob.ID, "a dm")
	must(t, err)
	// Barriers: one last message per shard; gateway order means everything before it was handled.
	_, err = e.UserSay(ch0.ID, alice.ID, "barrier")
	must(t, err)
	_, err = e.UserSay(ch1.ID, bob.ID, "barrier")
	must(t, err)
	s0.waitSeen(t, "barrier")
	s1.waitSeen(t, "barrier")

	tests := []struct {
		name                             string
		r                                *shardRecorder
		guilds, channels, inter, threads []string
	}{
		{"shard 0", s0, []string{g0.ID}, []string{ch0.ID, dm.ChannelID, ch0.ID}, []string{ch0.ID}, []string{th0.ID}},
		{"shard 1", s1, []string{g1.ID}, []string{ch1.ID, ch1.ID}, []string{ch1.ID}, []string{th1.ID}},
	}
	for _, tc := range tests {
		tc.r.mu.Lock()
		for _, f := range []struct {
			what      string
			got, want []string
		}{
			{"guilds", tc.r.guilds, tc.guilds}, {"message channels", tc.r.channels, tc.channels},
			{"interaction channels", tc.r.inter, tc.inter}, {"threads", tc.r.threads, tc.threads},
		} {
			if fmt.Sprint(f.got) != fmt.Sprint(f.want) {
				t.Errorf("%s: %s = %v, want %v", tc.name, f.what, f.got, f.want)
			}
		}
		tc.r.mu.Unlock()
	}
}

func TestGatewayBotAndIdentifyBudget(t *testing.T) {
	t.Parallel()
	e := discordtest.NewTest(t, discordtest.Options{Shards: 3,
		SessionStartLimit: discordtest.SessionStartLimit{Total: 10, Remaining: 5, MaxConcurrency: 2}})
	s := restSession(t, e)
	gb, err := s.GatewayBot()
	must(t, err)
	if gb.Shards != 3 || gb.SessionStartLimit.Total != 10 || gb.SessionStartLimit.Remaining != 5 ||
		gb.SessionStartLimit.MaxConcurrency != 2 || gb.SessionStartLimit.ResetAfter != 86400000 || strings.TrimSuffix(gb.URL, "/") != e.GatewayURL() {
		t.Fatalf("gateway/bot = %+v %+v", gb, gb.SessionStartLimit)
	}
	openShard(t, e, 2, 3)
	gb, err = s.GatewayBot()
	must(t, err)
	if gb.SessionStartLimit.Remaining != 4 {
		t.Errorf("remaining after one IDENTIFY = %d, want 4", gb.SessionStartLimit.Remaining)
	}
	e.SetSessionStartLimit(discordtest.SessionStartLimit{Total: 10, Remaining: 0, MaxConcurrency: 1})
	if l := e.SessionStartLimit(); l.Remaining != 0 {
		t.Errorf("SessionStartLimit() = %+v", l)
	}
}

func TestInvalidShardIsRefused(t *testing.T) {
	t.Parallel()
	e := discordtest.NewTest(t, discordtest.Options{})
	// discordgo checks the shard itself, so speak the protocol directly.
	tests := []struct {
		name  string
		shard string
	}{
		{"id equals count", "[2,2]"},
		{"negative id", "[-1,2]"},
		{"zero count", "[0,0]"},
		{"one element", "[0]"},
	}
	for _, tc := range tests {
		ws, _, err := websocket.DefaultDialer.Dial(e.GatewayURL(), nil)
		must(t, err)
		_, _, err = ws.ReadMessage() // HELLO
		must(t, err)
		must(t, ws.WriteMessage(websocket.TextMessage, []byte(`{"op":2,"d":{"token":"Bot `+e.Token()+`","intents":1,"shard":`+tc.shard+`}}`)))
		_, _, err = ws.ReadMessage()
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != 4010 {
			t.Errorf("%s: IDENTIFY with shard %s: %v, want close 4010", tc.name, tc.shard, err)
		}
		_ = ws.Close()
	}
	if n := e.GatewayStats().Identifies; n != 0 {
		t.Errorf("%d identifies counted", n)
	}
}
