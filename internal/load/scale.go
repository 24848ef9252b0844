package load

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/bot"
	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/internal/world"
	"github.com/agentbot/agentbot/model"
	"github.com/agentbot/agentbot/store/bolt"
)

// The scale scenarios of `bot load`: one shard's worth of guilds announced
// by GUILD_CREATE, and a big store opened to READY.

// ScaleResult is one scale scenario's figures.
type ScaleResult struct {
	Name    string
	Serving time.Duration // last GUILD_CREATE queued (or store opening) -> a reply sent
	Ready   time.Duration // bot start -> READY handled (store scenario)
	// Heap is the live heap the bot added (after GC), RSS the process's
	// growth since before the bot started (emulator world already built).
	Heap, RSS, PeakRSS uint64
	Note               string
}

func PrintScaleTable(w io.Writer, rs []ScaleResult) {
	fmt.Fprintf(w, "%-34s %9s %9s %10s %10s %10s  %s\n", "scenario", "ready-s", "serve-s", "bot-heapMB", "+rssMB", "peakRSSMB", "note")
	for _, r := range rs {
		fmt.Fprintf(w, "%-34s %9.2f %9.2f %10s %10s %10s  %s\n", r.Name, r.Ready.Seconds(), r.Serving.Seconds(), mib(r.Heap), mib(r.RSS), mib(r.PeakRSS), r.Note)
	}
}

// settledMemory is the live heap and RSS after a GC that returns freed memory.
func settledMemory() (heap, rss uint64) {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rss, _ = processRSS()
	return ms.HeapAlloc, rss
}

// newLoadBot is the application on emu with r's stand-in model, built
// and not yet run.
func newLoadBot(dir string, emu *discordtest.Emulator, g discordtest.Guild, r *loadRun, provider model.Provider, log zerolog.Logger) (*world.World, *bot.App, error) {
	w, err := world.On(world.Options{Dir: dir, Configure: func(c *config.Config) {
		// The turn budget would refuse a load test's users.
		c.Discord.Access.RateLimit = config.RateLimitConfig{}
		c.Discord.ThreadBindings.SpawnSubagentSessions = false
		c.Memory.Enabled = r.p.Memory
	}}, emu, g, discordtest.Channel{}, discordtest.User{})
	if err != nil {
		return nil, nil, err
	}
	a, err := bot.New(bot.Options{Config: w.Cfg, RetryBackoff: 10 * time.Millisecond},
		bot.Deps{Log: log, Provider: provider, BaseTransport: &loadTransport{base: http.DefaultTransport, run: r}, NoUsage: r.p.NoUsage, IndexLag: r.indexLag})
	if err != nil {
		return nil, nil, err
	}
	return w, a, nil
}

// GuildScale: guilds x channels x roles announced by GUILD_CREATE (one
// shard's maximum is 2,500 guilds). Serving is measured from the moment
// the emulator has queued the last GUILD_CREATE to the reply to a message
// posted right then in the last guild (it is read after every GUILD_CREATE).
func GuildScale(ctx context.Context, guilds, channels, roles int, log zerolog.Logger) (ScaleResult, error) {
	res := ScaleResult{Name: fmt.Sprintf("guilds %dx%d ch x%d roles", guilds, channels, roles)}
	dir, err := os.MkdirTemp("", "agentbot-load-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	emu := discordtest.New(discordtest.Options{DisableReferee: true})
	r := &loadRun{sent: map[string]*loadTurn{}}
	r.model = &loadModel{run: r}
	var last discordtest.Channel
	var user discordtest.User
	for g := 0; g < guilds; g++ {
		gd := emu.AddGuild(fmt.Sprintf("g%d", g))
		for i := 0; i < roles; i++ {
			if _, err := emu.AddRole(gd.ID, fmt.Sprintf("role-%d", i), 0); err != nil {
				return res, err
			}
		}
		for c := 0; c < channels; c++ {
			ch, err := emu.AddTextChannel(gd.ID, fmt.Sprintf("c%d", c))
			if err != nil {
				return res, err
			}
			last = ch
		}
		if g == guilds-1 {
			if user, err = emu.AddMember(gd.ID, "talker"); err != nil {
				return res, err
			}
		}
	}
	if err := emu.Start(); err != nil {
		return res, err
	}
	defer emu.Close()
	heap0, rss0 := settledMemory()
	start := time.Now()
	_, a, err := newLoadBot(dir, emu, discordtest.Guild{}, r, r.model, log)
	if err != nil {
		return res, err
	}
	run := world.Go(ctx, a)
	defer run.Stop()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	// GatewayStats takes the emulator's lock, which IDENTIFY holds while it
	// queues READY and every GUILD_CREATE.
	if err := emu.Wait(wctx, func() bool { return emu.GatewayStats().Identifies > 0 }); err != nil {
		return res, fmt.Errorf("no IDENTIFY: %w", err)
	}
	queued := time.Now()
	r.mu.Lock()
	t := &loadTurn{at: queued, done: make(chan struct{})}
	r.sent[last.ID] = t
	r.mu.Unlock()
	r.measure.Store(true)
	if _, err := emu.UserSay(last.ID, user.ID, "<@"+emu.BotUserID()+"> lt:"+last.ID+" are you there"); err != nil {
		return res, err
	}
	select {
	case <-t.done:
	case <-wctx.Done():
		return res, fmt.Errorf("no reply in the last guild: %w", wctx.Err())
	case <-run.Stopped():
		return res, fmt.Errorf("bot stopped: %w", run.Stop())
	}
	res.Serving = time.Since(queued)
	res.Ready = queued.Sub(start)
	heap1, rss1 := settledMemory()
	_, peak := processRSS()
	if path := os.Getenv("LOAD_HEAPPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			_ = pprof.Lookup("heap").WriteTo(f, 0)
			f.Close()
		}
	}
	res.Heap, res.PeakRSS = heap1-min(heap0, heap1), peak
	res.RSS = rss1 - min(rss0, rss1)
	res.Note = fmt.Sprintf("process RSS %s MiB before the bot (emulator world)", mib(rss0))
	return res, nil
}

// StoreScale opens a store holding bindings bindings and entries
// transcript entries (built once and cached under cacheDir) and measures
// the bot from start to READY, and to its first reply.
func StoreScale(ctx context.Context, cacheDir string, bindings, entries int, log zerolog.Logger, w io.Writer) (ScaleResult, error) {
	res := ScaleResult{Name: fmt.Sprintf("store %dk bindings %dk entries", bindings/1000, entries/1000)}
	src := filepath.Join(cacheDir, fmt.Sprintf("store-%d-%d.db", bindings, entries))
	if _, err := os.Stat(src); err != nil {
		fmt.Fprintf(w, "building %s (once)...\n", src)
		if err := buildScaleStore(ctx, src, bindings, entries); err != nil {
			return res, err
		}
	}
	dir, err := os.MkdirTemp("", "agentbot-load-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	if err := copyFile(src, filepath.Join(dir, "bot.db")); err != nil {
		return res, err
	}
	emu := discordtest.New(discordtest.Options{DisableReferee: true})
	g := emu.AddGuild("g")
	ch, err := emu.AddTextChannel(g.ID, "general")
	if err != nil {
		return res, err
	}
	u, err := emu.AddMember(g.ID, "talker")
	if err != nil {
		return res, err
	}
	if err := emu.Start(); err != nil {
		return res, err
	}
	defer emu.Close()
	r := &loadRun{sent: map[string]*loadTurn{}}
	r.model = &loadModel{run: r}
	heap0, rss0 := settledMemory()
	start := time.Now()
	_, a, err := newLoadBot(dir, emu, discordtest.Guild{}, r, r.model, log)
	if err != nil {
		return res, err
	}
	run := world.Go(ctx, a)
	defer run.Stop()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	select {
	case <-a.Connected():
	case <-run.Stopped():
		return res, fmt.Errorf("bot stopped: %w", run.Stop())
	case <-wctx.Done():
		return res, wctx.Err()
	}
	res.Ready = time.Since(start)
	r.mu.Lock()
	t := &loadTurn{at: time.Now(), done: make(chan struct{})}
	r.sent[ch.ID] = t
	r.mu.Unlock()
	if _, err := emu.UserSay(ch.ID, u.ID, "<@"+emu.BotUserID()+"> lt:"+ch.ID+" hello"); err != nil {
		return res, err
	}
	select {
	case <-t.done:
	case <-wctx.Done():
		return res, fmt.Errorf("no reply: %w", wctx.Err())
	}
	res.Serving = time.Since(start)
	heap1, rss1 := settledMemory()
	_, peak := processRSS()
	res.Heap, res.RSS, res.PeakRSS = heap1-min(heap0, heap1), rss1-min(rss0, rss1), peak
	if fi, err := os.Stat(src); err == nil {
		res.Note = fmt.Sprintf("store file %s MiB; serve-s: start -> first reply", mib(uint64(fi.Size())))
	}
	return res, nil
}

// buildScaleStore writes bindings thread bindings and entries transcript
// entries (over 10,000 sessions) through the store's own API.
func buildScaleStore(ctx context.Context, path string, bindings, entries int) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	_ = os.Remove(tmp)
	st, err := bolt.Open(tmp, bolt.Options{})
	if err != nil {
		return err
	}
	now := time.Now()
	recs := make([]binding.Record, 0, 10_000)
	for i := 0; i < bindings; i++ {
		recs = append(recs, binding.Record{ID: fmt.Sprintf("bind-%07d", i), TargetSessionKey: fmt.Sprintf("agent:main:subagent:s%07d", i),
			TargetKind: binding.KindSubagent, AgentID: "main", BoundBy: "system", Status: binding.StatusActive, BoundAt: now, LastActivityAt: now,
			Conversation: binding.ConversationRef{Channel: "discord", AccountID: "default", ConversationID: fmt.Sprintf("%d", 1_350_000_000_000_000_000+i),
				ParentConversationID: "1340000000000000000"}})
		if len(recs) == cap(recs) || i == bindings-1 {
			if err := st.PutBindings(ctx, recs...); err != nil {
				st.Close()
				return err
			}
			recs = recs[:0]
		}
	}
	const sessions, workers = 10_000, 256
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for wk := 0; wk < workers; wk++ {
		wg.Go(func() {
			for i := wk; i < entries; i += workers {
				key := fmt.Sprintf("agent:main:discord:channel:%d", 1_360_000_000_000_000_000+i%sessions)
				e := transcript.Entry{Role: transcript.RoleUser, Author: "someone", Source: transcript.SourceUser,
					Text:       fmt.Sprintf("message %d: a typical short chat message with a few words in it", i),
					MessageIDs: []string{fmt.Sprintf("%d", 1_370_000_000_000_000_000+i)}, At: now}
				if i%2 == 1 {
					e.Role, e.Author, e.Source, e.DeliveryID = transcript.RoleAssistant, "Assistant", transcript.SourceTurn, fmt.Sprintf("dlv-%d", i)
				}
				if _, _, err := st.Append(ctx, key, e); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		st.Close()
		return err
	}
	if err := st.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
