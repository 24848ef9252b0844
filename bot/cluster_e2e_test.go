package bot

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/internal/rule1"
	"github.com/agentbot/agentbot/scheduler"
	"github.com/agentbot/agentbot/store/postgres"
	"github.com/agentbot/agentbot/store/postgres/pgtest"
)

// withAppName names the connections a DSN opens (pg_stat_activity's
// application_name), so a test can cut one process off the database.
func withAppName(dsn, name string) string {
	if !strings.Contains(dsn, "://") {
		return dsn + " application_name=" + name
	}
	if strings.Contains(dsn, "?") {
		return dsn + "&application_name=" + name
	}
	return dsn + "?application_name=" + name
}

// TestClusterTwoShardsOnePostgresLeaderTakeover runs two bot processes
// (in-process apps, shards 0/2 and 1/2) on one emulator and one PostgreSQL
// database, with a guild on each shard:
//   - a mention in each guild is answered once, by the shard's process;
//   - /spawn thread:true in each guild: each completion lands once in its
//     bound thread, never in the parent;
//   - an in-chat job (every 1m, guild 0) and a background job (every 1m,
//     isolated, to #news of guild 1) run under the scheduler leader;
//   - the leader dies abruptly (its database connections are terminated,
//     which drops its advisory lock as a crash would, and the app is
//     cancelled); the other process takes over within 15 s and handles the
//     instants missed meanwhile by the catch-up rules, then runs on time;
//   - no instant ran twice, none was lost (each is a run or covered by a
//     late skip record), every job completion is displayed once, and Rule 1
//     holds in every channel and thread.
//
// The schedule runs on a fake clock shared by both apps (a real every-1m
// schedule would make the test last minutes); the clock starts in the
// past, so the leader's own cron trigger polls every second and runs what
// the fake clock says is due; the test also calls the leader's RunDue after
// advancing it. Leadership itself (lock retry, connection checks) runs on
// real time: that is the failover measured.
func TestClusterTwoShardsOnePostgresLeaderTakeover(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	emu := discordtest.NewTest(t, discordtest.Options{Shards: 2,
		SessionStartLimit: discordtest.SessionStartLimit{MaxConcurrency: 2}})
	type guild struct {
		g          discordtest.Guild
		ch, news   discordtest.Channel
		user       discordtest.User
		thread     string
		spawnLabel string
	}
	var guilds [2]*guild
	for shard := range 2 {
		g := emu.AddGuildOnShard(fmt.Sprint("cluster-", shard), shard, 2)
		ch, err := emu.AddTextChannel(g.ID, "general")
		if err != nil {
			t.Fatal(err)
		}
		news, err := emu.AddTextChannel(g.ID, "news")
		if err != nil {
			t.Fatal(err)
		}
		u, err := emu.AddMember(g.ID, fmt.Sprint("user", shard))
		if err != nil {
			t.Fatal(err)
		}
		guilds[shard] = &guild{g: g, ch: ch, news: news, user: u, spawnLabel: fmt.Sprint("helper", shard)}
	}

	fake := clock.NewFake(schedT0) // in the past: see above
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	var bots [2]*harness
	for shard := range 2 {
		h, err := newHarness(harnessOptions{Dir: t.TempDir(), Log: log, Clock: fake, Shared: emu, Configure: func(c *config.Config) {
			c.Discord.Shard = config.ShardConfig{ID: shard, Count: "2"}
			c.Store.Driver, c.Store.DSN = "postgres", withAppName(dsn, fmt.Sprint("bot", shard))
		}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.close() })
		if err := h.start(ctx); err != nil {
			t.Fatalf("shard %d: %v", shard, err)
		}
		bots[shard] = h
	}
	wait := func(what string, cond func() bool) {
		t.Helper()
		wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
		defer wcancel()
		if err := emu.Wait(wctx, cond); err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
	// pollLeader waits (leadership is not an emulator event) until exactly
	// one of the running bots leads and returns its index.
	pollLeader := func(running ...int) int {
		t.Helper()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		deadline := time.After(20 * time.Second)
		for {
			var leading []int
			for _, i := range running {
				if bots[i].app.leads() {
					leading = append(leading, i)
				}
			}
			if len(leading) == 1 {
				return leading[0]
			}
			select {
			case <-tick.C:
			case <-deadline:
				t.Fatalf("no single scheduler leader among bots %v (leading: %v)", running, leading)
			}
		}
	}
	leader := pollLeader(0, 1)
	t.Logf("bot %d leads the scheduler", leader)
	// What an operator sees: agentbot_scheduler_leader is 1 on the leader only.
	leaderMetric := func(i int) float64 {
		t.Helper()
		mfs, err := bots[i].app.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "agentbot_scheduler_leader" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("no agentbot_scheduler_leader metric")
		return 0
	}
	if leaderMetric(leader) != 1 || leaderMetric(1-leader) != 0 {
		t.Errorf("agentbot_scheduler_leader: bot %d %v, bot %d %v", leader, leaderMetric(leader), 1-leader, leaderMetric(1-leader))
	}

	// Mentions: answered once in each guild.
	mention := "<@" + emu.BotUserID() + "> "
	for shard, g := range guilds {
		if _, err := emu.UserSay(g.ch.ID, g.user.ID, fmt.Sprintf("%shello shard %d", mention, shard)); err != nil {
			t.Fatal(err)
		}
	}
	for shard, g := range guilds {
		wait(fmt.Sprint("the reply in guild ", shard), func() bool { return len(emu.Messages(g.ch.ID)) >= 2 })
	}

	// /spawn thread:true in each guild.
	for _, g := range guilds {
		if _, err := emu.InvokeCommand(g.ch.ID, g.user.ID, "spawn", discordtest.CommandOption{Name: "task", Value: "check " + g.spawnLabel},
			discordtest.CommandOption{Name: "label", Value: g.spawnLabel}, discordtest.CommandOption{Name: "thread", Value: true}); err != nil {
			t.Fatal(err)
		}
	}
	for shard, g := range guilds {
		wait(fmt.Sprint("the completion in the thread of guild ", shard), func() bool {
			for _, th := range emu.Threads(g.ch.ID) {
				if strings.Contains(th.Name, g.spawnLabel) {
					g.thread = th.ID
				}
			}
			return g.thread != "" && countContaining(emu.Messages(g.thread), "finished") >= 1
		})
	}

	// Jobs: in-chat in guild 0, background to #news in guild 1; each /cron
	// add is served by the process owning the guild's shard.
	cron := func(g *guild, opts ...discordtest.CommandOption) {
		t.Helper()
		in, err := emu.InvokeCommand(g.ch.ID, g.user.ID, "cron", discordtest.CommandOption{Name: "add", Value: opts})
		if err != nil {
			t.Fatal(err)
		}
		wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
		defer wcancel()
		if r, got, err := emu.WaitAnswer(wctx, in.ID); err != nil || r.Ephemeral {
			t.Fatalf("/cron add: %+v, %v", got.Responses, err)
		}
	}
	cron(guilds[0], opt("schedule", "every 1m"), opt("prompt", "cluster tick"))
	cron(guilds[1], opt("schedule", "every 1m"), opt("prompt", "cluster digest"), opt("target", "isolated"), opt("to", "channel:"+guilds[1].news.ID))
	jobs, err := bots[0].app.sched.Scheduler.List(ctx)
	if err != nil || len(jobs) != 2 {
		t.Fatalf("jobs = %+v, %v", jobs, err)
	}
	const trigger = "⏰ cluster tick: cluster tick"
	ticks := func() int { return len(botMessages(bots[0], guilds[0].ch.ID, trigger)) }
	replies := func() int { return countContaining(botMessages(bots[0], guilds[0].ch.ID, "echo:"), "cluster tick") }
	digests := func() int { return len(botMessages(bots[1], guilds[1].news.ID, "echo: cluster digest")) }
	runs := 0 // instants run so far (per job)
	step := func(who int, what string) {
		t.Helper()
		fake.Advance(time.Minute)
		if err := bots[who].app.sched.Scheduler.RunDue(ctx); err != nil {
			t.Fatalf("RunDue: %v", err)
		}
		runs++
		wait(what, func() bool { return ticks() == runs && replies() == runs && digests() == runs })
	}
	step(leader, "instant 1 of both jobs")
	step(leader, "instant 2 of both jobs")

	// The leader dies: its connections go (the server drops its locks, as
	// when a process is killed), and the app is cancelled. The old app is
	// fully stopped before the clock moves on: a killed process runs
	// nothing after its death, which an in-process app cancelled with a
	// shared fake clock would otherwise be able to.
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	killedAt := time.Now()
	var killed int
	if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`,
		fmt.Sprint("bot", leader)).Scan(&killed); err != nil {
		t.Fatal(err)
	}
	if err := bots[leader].stop(); err != nil {
		t.Logf("the killed bot stopped with: %v", err)
	}
	standby := 1 - leader
	fake.Advance(3 * time.Minute) // instants 3, 4 and 5 pass without a leader
	if got := pollLeader(standby); got != standby {
		t.Fatalf("leader %d", got)
	}
	takeover := time.Since(killedAt)
	if leaderMetric(standby) != 1 {
		t.Errorf("agentbot_scheduler_leader is %v on the new leader", leaderMetric(standby))
	}
	// The new leader's catch-up at start: instant 5 on time, 3 and 4 skipped.
	runs++
	wait("the catch-up run after the takeover", func() bool { return ticks() == runs && replies() == runs && digests() == runs })
	caughtUp := time.Since(killedAt)
	t.Logf("killed bot %d (%d connections); bot %d led after %v and displayed the catch-up after %v",
		leader, killed, standby, takeover.Round(time.Millisecond), caughtUp.Round(time.Millisecond))
	if takeover > 15*time.Second {
		t.Errorf("takeover took %v, want within 15s", takeover)
	}
	step(standby, "instant 6 under the new leader")

	// The surviving shard still answers its guild.
	if _, err := emu.UserSay(guilds[standby].ch.ID, guilds[standby].user.ID, mention+"still there?"); err != nil {
		t.Fatal(err)
	}
	wait("the reply after the takeover", func() bool { return countContaining(emu.Messages(guilds[standby].ch.ID), "still there?") == 2 })

	if err := bots[standby].stop(); err != nil {
		t.Fatal(err)
	}

	// Displayed once each.
	for shard, g := range guilds {
		if n := countContaining(emu.Messages(g.ch.ID), fmt.Sprint("hello shard ", shard)); n != 2 {
			t.Errorf("guild %d: the mention and its reply shown %d times together, want 2", shard, n)
		}
		if n := countContaining(emu.Messages(g.thread), g.spawnLabel+" finished:"); n != 1 {
			t.Errorf("guild %d: the completion shown %d times in its thread", shard, n)
		}
		if n := countContaining(emu.Messages(g.ch.ID), "finished"); n != 0 {
			t.Errorf("guild %d: the completion shown %d times in the parent channel", shard, n)
		}
	}
	if ticks() != runs || replies() != runs || digests() != runs {
		t.Errorf("displayed %d triggers, %d replies, %d digests; want %d each", ticks(), replies(), digests(), runs)
	}

	st, err := postgres.Open(context.Background(), dsn, postgres.Options{ConnectTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, j := range jobs {
		rs, err := st.Runs(ctx, j.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		ran := map[time.Time]int{}
		covered := map[time.Time]bool{}
		var first time.Time
		for _, r := range rs {
			at := r.ScheduledAt.UTC()
			if first.IsZero() || at.Before(first) {
				first = at
			}
			switch r.Status {
			case scheduler.StatusSkipped:
				if !r.Late {
					t.Errorf("job %s: skip record not marked late: %+v", j.ID, r)
				}
				for k := range r.Missed + 1 {
					covered[at.Add(-time.Duration(k)*time.Minute)] = true
				}
			case scheduler.StatusOK:
				ran[at]++
				covered[at] = true
			default:
				t.Errorf("job %s: run %+v", j.ID, r)
			}
		}
		for at, n := range ran {
			if n > 1 {
				t.Errorf("job %s: instant %v ran %d times", j.ID, at, n)
			}
		}
		if len(ran) != runs {
			t.Errorf("job %s: %d instants ran, want %d", j.ID, len(ran), runs)
		}
		for k := range 6 {
			if at := first.Add(time.Duration(k) * time.Minute); !covered[at] {
				t.Errorf("job %s: instant %d (%v) neither ran nor was recorded as missed", j.ID, k+1, at)
			}
		}
		var history []string
		for _, r := range slices.Backward(rs) {
			history = append(history, fmt.Sprintf("%s %s late=%v missed=%d", r.ScheduledAt.Sub(first), r.Status, r.Late, r.Missed))
		}
		t.Logf("job %s (%s): %s", j.ID, j.Mode(), strings.Join(history, "; "))
	}

	channels := []string{}
	for _, g := range guilds {
		channels = append(channels, g.ch.ID, g.news.ID, g.thread)
	}
	problems, err := rule1.Check(ctx, rule1.Emulator(emu), st, channels, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("rule 1: %s", p)
	}
	for _, v := range emu.Violations() {
		t.Errorf("OpenAPI violation: %s", v)
	}
}
