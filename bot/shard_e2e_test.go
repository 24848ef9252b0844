package bot

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/internal/rule1"
	"github.com/agentbot/agentbot/store/bolt"
)

// TestShardedBotsAnswerOwnGuildsOnce runs two bots on one emulator as
// shards 0/2 and 1/2, each with its own store (a shared store across
// processes is the PostgreSQL work), with a guild on each shard: a mention
// in each guild is answered exactly once, by the process owning its shard.
func TestShardedBotsAnswerOwnGuildsOnce(t *testing.T) {
	t.Parallel()
	// max_concurrency 2: both shards may identify at once (no 5 s pacing).
	emu := discordtest.NewTest(t, discordtest.Options{Shards: 2,
		SessionStartLimit: discordtest.SessionStartLimit{MaxConcurrency: 2}})
	type guild struct {
		g    discordtest.Guild
		ch   discordtest.Channel
		user discordtest.User
	}
	var guilds [2]guild
	for shard := range 2 {
		g := emu.AddGuildOnShard(fmt.Sprint("guild-on-shard-", shard), shard, 2)
		ch, err := emu.AddTextChannel(g.ID, "general")
		if err != nil {
			t.Fatal(err)
		}
		u, err := emu.AddMember(g.ID, fmt.Sprint("user", shard))
		if err != nil {
			t.Fatal(err)
		}
		if got := discordtest.GuildShard(g.ID, 2); got != shard {
			t.Fatalf("guild %s is on shard %d, want %d", g.ID, got, shard)
		}
		guilds[shard] = guild{g, ch, u}
	}

	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	var bots [2]*harness
	for shard := range 2 {
		h, err := newHarness(harnessOptions{Dir: t.TempDir(), Log: log, Shared: emu, Configure: func(c *config.Config) {
			c.Discord.Shard = config.ShardConfig{ID: shard, Count: "2"}
		}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.close() })
		if err := h.start(t.Context()); err != nil {
			t.Fatalf("shard %d: %v", shard, err)
		}
		if id, n := h.app.gateway.ShardInfo(); id != shard || n != 2 {
			t.Fatalf("bot %d serves shard %d of %d", shard, id, n)
		}
		bots[shard] = h
	}
	shards := map[[2]int]int{}
	for _, sh := range emu.SessionShards() {
		shards[sh]++
	}
	if shards[[2]int{0, 2}] != 1 || shards[[2]int{1, 2}] != 1 || len(shards) != 2 {
		t.Fatalf("gateway sessions by shard: %v", shards)
	}

	mention := "<@" + emu.BotUserID() + "> "
	for shard, g := range guilds {
		if _, err := emu.UserSay(g.ch.ID, g.user.ID, fmt.Sprintf("%shello shard %d", mention, shard)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for shard, g := range guilds {
		msgs, err := emu.WaitMessages(ctx, g.ch.ID, 2)
		if err != nil {
			t.Fatal(err)
		}
		if r := msgs[1]; r.Author.ID != emu.BotUserID() || !strings.Contains(r.Content, fmt.Sprint("hello shard ", shard)) {
			t.Fatalf("guild on shard %d: reply %q by %s", shard, r.Content, r.Author.Username)
		}
	}
	// Both bots stop (draining what they accepted) before counting, so a
	// late second answer would be seen.
	for _, h := range bots {
		if err := h.stop(); err != nil {
			t.Fatal(err)
		}
	}
	for shard, g := range guilds {
		if n := len(emu.Messages(g.ch.ID)); n != 2 {
			t.Errorf("guild on shard %d: %d messages, want the mention and one reply", shard, n)
		}
	}
	// Who answered: each reply is in the transcripts of its shard's bot
	// (Rule 1 holds there) and in no transcript of the other bot.
	for shard, h := range bots {
		st, err := bolt.Open(h.cfg.Store.Path, bolt.Options{LockTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		own, err := rule1.Check(t.Context(), rule1.Emulator(emu), st, []string{guilds[shard].ch.ID}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range own {
			t.Errorf("bot %d, own guild: %s", shard, p)
		}
		other, err := rule1.Check(t.Context(), rule1.Emulator(emu), st, []string{guilds[1-shard].ch.ID}, nil)
		if err != nil {
			t.Fatal(err)
		}
		// The other guild's mention and reply are in none of this bot's transcripts.
		if len(other) != 2 || !strings.Contains(other[0], "that no transcript holds") || !strings.Contains(other[1], "that no transcript holds") {
			t.Errorf("bot %d holds the other shard's reply in its transcripts: %v", shard, other)
		}
		st.Close()
	}
}
