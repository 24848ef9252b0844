package discord

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"
)

// Shard is the gateway shard this process serves. The zero value is
// unsharded (shard 0 of 1). With Auto the count is Discord's recommendation
// (GET /gateway/bot "shards"), read once before the first IDENTIFY.
type Shard struct {
	ID    int
	Count int // 0 or 1: unsharded (ignored when Auto)
	Auto  bool
}

// Identify pacing and backoff constants.
const (
	// identifyWindow is Discord's spacing between IDENTIFYs of one
	// rate-limit key (shard_id % max_concurrency).
	identifyWindow = 5 * time.Second
	// maxIdentifyBackoff caps the wait between failed connect attempts.
	maxIdentifyBackoff = 2 * time.Minute
)

// identifyDelay is how long shard id waits before its first IDENTIFY when
// every shard process starts together: shards sharing a rate-limit key
// (id % maxConcurrency) identify one per 5 s window, so shard id goes in
// window id / maxConcurrency. Shards 0..maxConcurrency-1 go at once.
func identifyDelay(shardID, maxConcurrency int) time.Duration {
	if maxConcurrency < 1 {
		maxConcurrency = 1
	}
	if shardID < 0 {
		shardID = 0
	}
	return time.Duration(shardID/maxConcurrency) * identifyWindow
}

// identifyBackoff is the wait after the n-th consecutive failed connect
// attempt: 1 s, 2 s, 4 s, … capped at maxIdentifyBackoff; 0 for n <= 0.
func identifyBackoff(failures int) time.Duration {
	if failures <= 0 {
		return 0
	}
	if failures > 8 { // 1s<<7 = 128 s is already past the cap
		return maxIdentifyBackoff
	}
	return min(time.Second<<(failures-1), maxIdentifyBackoff)
}

// fatalGatewayClose reports close codes after which reconnecting cannot
// help: bad token, bad shard, sharding required, bad API version or intents.
func fatalGatewayClose(err error) bool {
	var ce *websocket.CloseError
	if !errors.As(err, &ce) {
		return errors.Is(err, discordgo.ErrWSShardBounds)
	}
	switch ce.Code {
	case 4004, 4010, 4011, 4012, 4013, 4014:
		return true
	}
	return false
}

// closeHint says what to do about a fatal gateway close.
func closeHint(err error) string {
	var ce *websocket.CloseError
	if !errors.As(err, &ce) {
		return ""
	}
	switch ce.Code {
	case 4004:
		return " — Discord rejected the token: reset it in the Developer Portal (Bot → Reset Token) and set DISCORD_TOKEN"
	case 4014:
		return " — enable the Message Content intent in the Developer Portal (Bot → Privileged Gateway Intents)"
	case 4010, 4011:
		return " — check discord.shard (id below count; Discord requires sharding for this many guilds)"
	}
	return ""
}

// sleepCtx waits d or until ctx ends (the default Options.Sleep).
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// IdentifyAttempts is the number of gateway connect attempts (each an
// IDENTIFY when it got that far) this adapter made; tests and metrics read it.
func (g *Gateway) IdentifyAttempts() int { return int(g.identifies.Load()) }

// ShardInfo returns the shard this adapter serves ([id, count]); with
// count auto it is known only after connecting.
func (g *Gateway) ShardInfo() (id, count int) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.shard.ID, g.shard.Count
}

// ownsGuild reports whether this process's shard receives the guild's
// events (Discord: (guild_id >> 22) % count; DMs, guild "", go to shard 0).
func (g *Gateway) ownsGuild(guildID string) bool {
	id, count := g.ShardInfo()
	if count <= 1 {
		return true
	}
	if guildID == "" {
		return id == 0
	}
	gid, err := strconv.ParseUint(guildID, 10, 64)
	if err != nil {
		return false
	}
	return int((gid>>22)%uint64(count)) == id
}

// connect opens the gateway session, pacing and guarding IDENTIFY:
//
//   - GET /gateway/bot before every attempt: with count auto it fixes the
//     shard count (once); when session_start_limit.remaining is 0 it logs
//     an error and waits reset_after instead of identifying (a spent daily
//     budget would get the token reset by Discord);
//   - the first attempt waits identifyDelay (max_concurrency buckets);
//   - a failed attempt is retried inside this process after 1 s, 2 s, 4 s …
//     (capped at 2 min), so a flapping network never turns into a crash
//     loop of restarts each spending an IDENTIFY. The failure counter lives
//     in the process (Run), not in a file: a process that stays up needs no
//     file, and a restarted one still sees Discord's own remaining count.
//
// It returns nil once connected, ctx's error when ctx ends first, and an
// error for fatal close codes (bad token, bad shard, disallowed intents).
func (g *Gateway) connect(ctx context.Context, s *discordgo.Session) error {
	g.prepare(s)
	sleep := g.opt.Sleep
	if sleep == nil {
		sleep = sleepCtx
	}
	failures, attempts := 0, 0
	for {
		wait := time.Duration(0)
		gb, err := s.GatewayBot(discordgo.WithContext(ctx))
		switch {
		case err != nil && ctx.Err() != nil:
			return ctx.Err()
		case err != nil && g.opt.Shard.Auto && !g.shardKnown():
			failures++
			g.log.Error().Err(err).Int("failures", failures).Msg("discord: GET /gateway/bot failed; shard count auto needs it")
			if err := sleep(ctx, identifyBackoff(failures)); err != nil {
				return err
			}
			continue
		case err != nil:
			g.log.Warn().Err(err).Msg("discord: GET /gateway/bot failed; connecting without identify pacing")
		default:
			if err := g.fixShard(s, gb.Shards); err != nil {
				return err
			}
			lim := gb.SessionStartLimit
			if lim.Total > 0 && lim.Remaining <= 0 {
				reset := time.Duration(lim.ResetAfter) * time.Millisecond
				g.log.Error().Int("total", lim.Total).Dur("resetAfter", reset).
					Msg("discord: the daily identify budget (session_start_limit) is spent; not identifying until it resets")
				if err := sleep(ctx, max(reset, time.Second)); err != nil {
					return err
				}
				continue
			}
			if attempts == 0 {
				wait = identifyDelay(s.ShardID, lim.MaxConcurrency)
			}
		}
		wait = max(wait, identifyBackoff(failures))
		if wait > 0 {
			g.log.Info().Dur("wait", wait).Int("shard", s.ShardID).Int("failures", failures).Msg("discord: waiting before IDENTIFY")
		}
		if err := sleep(ctx, wait); err != nil {
			return err
		}
		attempts++
		g.identifies.Add(1)
		err = s.Open()
		if err == nil {
			return nil
		}
		if fatalGatewayClose(err) {
			return fmt.Errorf("discord: connect gateway (shard %d of %d): %w%s", s.ShardID, max(s.ShardCount, 1), err, closeHint(err))
		}
		failures++
		g.log.Error().Err(err).Int("failures", failures).Dur("retryIn", identifyBackoff(failures)).Msg("discord: connect gateway failed")
	}
}

func (g *Gateway) shardKnown() bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.shard.Count > 0
}

// fixShard settles the shard count (auto: Discord's recommendation, once)
// and sets it on the session before its first Open.
func (g *Gateway) fixShard(s *discordgo.Session, recommended int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shard.Count > 0 {
		return nil
	}
	n := max(recommended, 1)
	if g.shard.ID >= n {
		return fmt.Errorf("discord: discord.shard.id %d is not below the shard count Discord recommends (%d); run ids 0 to %d", g.shard.ID, n, n-1)
	}
	g.shard.Count = n
	s.ShardID, s.ShardCount = g.shard.ID, n
	g.log.Info().Int("shard", g.shard.ID).Int("count", n).Msg("discord: shard count from GET /gateway/bot")
	return nil
}
