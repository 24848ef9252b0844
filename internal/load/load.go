// Package load is `bot load` (`make load`): the real application against
// the built-in Discord emulator under a load profile, and the scale
// scenarios (guilds announced at start, a large store), printed as tables.
package load

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/internal/world"
	"github.com/agentbot/agentbot/model"
	"github.com/agentbot/agentbot/model/fallback"
)

// The load harness: the real bot (the application's wiring, bbolt, the adapter over
// real discordgo) against the emulator, N conversations across G guilds
// talking at a set rate to a stand-in model. `bot load` runs a profile and
// prints one table; `make load` runs the standard one. Nothing here runs in
// `make test` except TestLoadSmoke's tiny profile, which asserts counts,
// never a time.
//
// What is measured, per turn: bot-added latency = (the reply's POST
// /channels/{id}/messages leaving the bot's HTTP client for the emulator)
// - (MESSAGE_CREATE handed to the emulator's gateway writer) - (the
// model's own time, measured inside the model stand-in). CPU, allocations,
// heap and RSS are the whole process's: the bot, the emulator and the
// driver share it (the table says so); the "emulator+driver" calibration
// row measures what the same traffic costs without the bot, so the bot's
// own share is the difference.

// Profile is one load run's shape.
type Profile struct {
	Name          string
	Conversations int
	Guilds        int
	Rate          float64       // turns offered per second, across all conversations
	Duration      time.Duration // measured window (after one warm-up turn per conversation)
	ModelLatency  time.Duration // the stand-in model's time per call
	// Hot429, when set, makes conversation 0's channel answer every message
	// create with 429 for the window (its sends retry; the others are measured).
	Hot429 bool
	// DeadPrimary, when set, puts the stand-in behind a fallback chain whose
	// first model fails every call after this long (a timeout), with the
	// bot's circuit breaker (issue 30's measure).
	DeadPrimary time.Duration
	// NoUsage runs the bot without usage accounting (its cost is the
	// difference to the same profile with it).
	NoUsage bool
	// Memory turns memory.enabled on: the recall indexer follows every
	// transcript write, and its lag (entry written -> indexed) is measured.
	Memory bool
}

// Result is one run's figures.
type Result struct {
	Profile                     Profile
	Turns                       int           // replies measured
	Offered                     int           // messages sent in the window
	Busy                        int           // ticks skipped: every conversation had a turn in flight
	Lost                        int           // messages sent whose reply never came (window end + grace)
	P50, P95, P99, Max          time.Duration // bot-added latency
	TurnsPerSec                 float64
	CPUPerTurn                  time.Duration // process user+system CPU / turns
	AllocsPerTurn, BytesPerTurn float64
	HeapInuse, RSS, PeakRSS     uint64
	Status429                   int // 429s the emulator served in the window
	// FsyncP50/P99 are a probe's write+fdatasync times on the store's disk
	// during the window (one every 50 ms): each turn waits for several.
	FsyncP50, FsyncP99 time.Duration
	// IndexLagP50/P99 (Memory): entry written -> in the recall index, over
	// the entries written in the window; IndexLagN counts them.
	IndexLagP50, IndexLagP99 time.Duration
	IndexLagN                int
}

// loadRun is the driver's state for one run.
type loadRun struct {
	p     Profile
	w     *world.World
	run   *world.Run
	user  []string // per guild: the member who talks
	chans []loadConv

	mu      sync.Mutex
	sent    map[string]*loadTurn // channel id -> the turn in flight
	lat     []time.Duration
	measure atomic.Bool
	hot     atomic.Bool // conversation 0's channel answers only 429 now
	model   *loadModel

	lagMu   sync.Mutex
	lagFrom time.Time // the window: entries written from lagFrom to lagTo
	lagTo   time.Time
	lags    []time.Duration
}

// indexLag is the recall indexer's hook (bot.Deps.IndexLag): one applied
// change, lag after its entry was written.
func (r *loadRun) indexLag(lag time.Duration) {
	written := time.Now().Add(-lag)
	r.lagMu.Lock()
	defer r.lagMu.Unlock()
	if !r.lagFrom.IsZero() && !written.Before(r.lagFrom) && (r.lagTo.IsZero() || written.Before(r.lagTo)) {
		r.lags = append(r.lags, lag)
	}
}

type loadConv struct {
	channel, user, tag string
}

type loadTurn struct {
	conv  int
	at    time.Time
	model time.Duration
	done  chan struct{}
}

// loadModel is the stand-in model: it answers after latency and records
// its own time per turn (the tag in the user's text).
type loadModel struct {
	latency time.Duration
	run     *loadRun
}

func (m *loadModel) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	start := time.Now()
	if m.latency > 0 {
		t := time.NewTimer(m.latency)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return model.Response{}, ctx.Err()
		}
	}
	tag := ""
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == model.RoleUser {
			tag = loadTag(req.Messages[i].Text)
			break
		}
	}
	m.run.modelTook(tag, time.Since(start))
	return model.Response{Text: "ack " + tag}, nil
}

// loadTag finds "lt:<channel>" in text.
func loadTag(text string) string {
	i := strings.Index(text, "lt:")
	if i < 0 {
		return ""
	}
	s := text[i+3:]
	if j := strings.IndexByte(s, ' '); j >= 0 {
		s = s[:j]
	}
	return s
}

func (r *loadRun) modelTook(channel string, d time.Duration) {
	r.mu.Lock()
	if t := r.sent[channel]; t != nil {
		t.model += d
	}
	r.mu.Unlock()
}

// replied is called when the bot's reply request leaves for the emulator.
func (r *loadRun) replied(channel string, now time.Time) {
	if r.hot.Load() && channel == r.chans[0].channel {
		return // every attempt is answered 429: not a reply, and not measured
	}
	r.mu.Lock()
	t := r.sent[channel]
	if t == nil {
		r.mu.Unlock()
		return
	}
	delete(r.sent, channel)
	if r.measure.Load() {
		r.lat = append(r.lat, now.Sub(t.at)-t.model)
	}
	r.mu.Unlock()
	close(t.done)
}

// loadTransport sees every REST request the bot makes, before the emulator does.
type loadTransport struct {
	base http.RoundTripper
	run  *loadRun
}

func (t *loadTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost {
		// /api/v9/channels/{id}/messages
		p := strings.TrimPrefix(req.URL.Path, discordtest.APIPrefix)
		if rest, ok := strings.CutPrefix(p, "/channels/"); ok {
			if id, tail, ok := strings.Cut(rest, "/"); ok && tail == "messages" {
				t.run.replied(id, time.Now())
			}
		}
	}
	return t.base.RoundTrip(req)
}

// newLoadRun seeds the world, starts the emulator and the bot, and warms
// every conversation up with one turn.
func newLoadRun(ctx context.Context, dir string, p Profile, log zerolog.Logger) (*loadRun, error) {
	if p.Guilds <= 0 {
		p.Guilds = 1
	}
	if p.Conversations < p.Guilds {
		p.Guilds = p.Conversations
	}
	r := &loadRun{p: p, sent: map[string]*loadTurn{}}
	r.model = &loadModel{latency: p.ModelLatency, run: r}
	emu := discordtest.New(discordtest.Options{DisableReferee: true})
	var guilds []discordtest.Guild
	for g := 0; g < p.Guilds; g++ {
		gd := emu.AddGuild(fmt.Sprintf("load-%d", g))
		u, err := emu.AddMember(gd.ID, fmt.Sprintf("user%d", g))
		if err != nil {
			return nil, err
		}
		guilds = append(guilds, gd)
		r.user = append(r.user, u.ID)
	}
	for c := 0; c < p.Conversations; c++ {
		g := c % p.Guilds
		ch, err := emu.AddTextChannel(guilds[g].ID, fmt.Sprintf("c%d", c))
		if err != nil {
			return nil, err
		}
		r.chans = append(r.chans, loadConv{channel: ch.ID, user: r.user[g], tag: ch.ID})
	}
	if err := emu.Start(); err != nil {
		return nil, err
	}
	provider, err := loadProvider(p, r.model, log)
	if err != nil {
		return nil, err
	}
	w, a, err := newLoadBot(dir, emu, guilds[0], r, provider, log)
	if err != nil {
		return nil, err
	}
	r.w = w
	if r.run, err = w.Start(ctx, a); err != nil {
		_ = w.Close()
		return nil, err
	}
	// Warm up: one turn per conversation (the session's first turn creates it).
	for i := range r.chans {
		if err := r.say(i); err != nil {
			_ = r.close()
			return nil, err
		}
	}
	if err := r.waitIdle(ctx, 60*time.Second); err != nil {
		_ = r.close()
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	return r, nil
}

// loadProvider is the stand-in, or with p.DeadPrimary a chain of a dead
// model falling back to it.
func loadProvider(p Profile, standIn model.Provider, log zerolog.Logger) (model.Provider, error) {
	if p.DeadPrimary <= 0 {
		return standIn, nil
	}
	set, err := fallback.New(fallback.Options{Models: map[string]fallback.Model{
		"dead": {Provider: deadModel{p.DeadPrimary}, Fallbacks: []string{"stand-in"}}, "stand-in": {Provider: standIn}},
		Breaker: fallback.DefaultBreaker}, fallback.Deps{Clock: clock.Real{}, Log: log})
	if err != nil {
		return nil, err
	}
	chain, _ := set.Provider("dead")
	return chain, nil
}

// deadModel fails every call with a timeout after its delay.
type deadModel struct{ after time.Duration }

func (d deadModel) Complete(ctx context.Context, _ model.Request) (model.Response, error) {
	t := time.NewTimer(d.after)
	defer t.Stop()
	select {
	case <-t.C:
		return model.Response{}, &model.Error{Kind: model.KindTimeout, Provider: "dead"}
	case <-ctx.Done():
		return model.Response{}, ctx.Err()
	}
}

var errBusy = errors.New("conversation busy")

// say posts conversation i's next message unless its last turn is in flight.
func (r *loadRun) say(i int) error {
	c := r.chans[i]
	r.mu.Lock()
	if r.sent[c.channel] != nil {
		r.mu.Unlock()
		return errBusy
	}
	t := &loadTurn{conv: i, at: time.Now(), done: make(chan struct{})}
	r.sent[c.channel] = t
	r.mu.Unlock()
	_, err := r.w.Emu.UserSay(c.channel, c.user, "<@"+r.w.Emu.BotUserID()+"> lt:"+c.tag+" how is it going")
	if err != nil {
		r.mu.Lock()
		delete(r.sent, c.channel)
		r.mu.Unlock()
		return fmt.Errorf("post in %s: %w", c.channel, err)
	}
	return nil
}

// waitIdle waits until no turn is in flight or the timeout passes; it
// returns how many remain.
func (r *loadRun) waitIdle(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		r.mu.Lock()
		var wait chan struct{}
		n := len(r.sent)
		for ch, t := range r.sent {
			if r.p.Hot429 && ch == r.chans[0].channel {
				n--
				continue
			}
			wait = t.done
			break
		}
		r.mu.Unlock()
		if n == 0 {
			return nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("%d turn(s) never answered", n)
		}
		select {
		case <-wait:
		case <-time.After(min(left, 100*time.Millisecond)):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// drive offers p.Rate turns/s for p.Duration, round-robin over the
// conversations (skipping one whose turn is still in flight), and
// measures the window.
func (r *loadRun) drive(ctx context.Context, cpuProfile io.Writer) (Result, error) {
	res := Result{Profile: r.p}
	if r.p.Hot429 {
		hot := r.chans[0].channel
		r.w.Emu.InjectFault(discordtest.Fault{Method: "POST", Path: "/channels/" + hot + "/messages", Times: -1,
			Status: http.StatusTooManyRequests, RetryAfter: time.Second})
		r.hot.Store(true)
		if err := r.say(0); err != nil {
			return res, err
		}
	}
	runtime.GC()
	before429 := r.w.Emu.RateLimited().Total
	cpu0 := processCPU()
	allocs0, bytes0 := allocCounters()
	if cpuProfile != nil {
		if err := pprof.StartCPUProfile(cpuProfile); err != nil {
			return res, err
		}
	}
	probeStop := make(chan struct{})
	probeDone := make(chan []time.Duration, 1)
	go func() { probeDone <- fsyncProbe(r.w.Cfg.Store.Path+".probe", probeStop) }()
	start := r.startMeasure()
	interval := time.Duration(float64(time.Second) / r.p.Rate)
	next, sent, cursor := 0, 0, 0
	tick := time.NewTicker(min(interval, 5*time.Millisecond))
	defer tick.Stop()
	for time.Since(start) < r.p.Duration {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-tick.C:
		}
		due := int(time.Since(start) / interval)
		for ; next < due; next++ {
			ok := false
			for try := 0; try < len(r.chans); try++ {
				i := cursor % len(r.chans)
				cursor++
				if r.p.Hot429 && i == 0 {
					continue
				}
				if err := r.say(i); err == nil {
					ok = true
					sent++
					break
				} else if !errors.Is(err, errBusy) {
					return res, err
				}
			}
			if !ok {
				res.Busy++
			}
		}
	}
	idleErr := r.waitIdle(ctx, 10*time.Second)
	elapsed := time.Since(start)
	r.stopMeasure()
	if cpuProfile != nil {
		pprof.StopCPUProfile()
	}
	cpu1 := processCPU()
	allocs1, bytes1 := allocCounters()
	close(probeStop)
	if fs := <-probeDone; len(fs) > 0 {
		slices.Sort(fs)
		res.FsyncP50, res.FsyncP99 = pct(fs, 50), pct(fs, 99)
	}
	r.mu.Lock()
	lat := slices.Clone(r.lat)
	r.lat = r.lat[:0]
	lost := len(r.sent)
	if r.p.Hot429 && r.sent[r.chans[0].channel] != nil {
		lost--
	}
	r.mu.Unlock()
	if idleErr != nil && lost == 0 {
		return res, idleErr
	}
	res.Offered, res.Turns, res.Lost = sent, len(lat), lost
	res.TurnsPerSec = float64(len(lat)) / elapsed.Seconds()
	if len(lat) > 0 {
		slices.Sort(lat)
		res.P50, res.P95, res.P99, res.Max = pct(lat, 50), pct(lat, 95), pct(lat, 99), lat[len(lat)-1]
		res.CPUPerTurn = (cpu1 - cpu0) / time.Duration(len(lat))
		res.AllocsPerTurn = float64(allocs1-allocs0) / float64(len(lat))
		res.BytesPerTurn = float64(bytes1-bytes0) / float64(len(lat))
	}
	r.indexLags(ctx, &res)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	res.HeapInuse = ms.HeapInuse
	res.RSS, res.PeakRSS = processRSS()
	res.Status429 = r.w.Emu.RateLimited().Total - before429
	if r.p.Hot429 {
		r.w.Emu.ClearFaults()
	}
	return res, nil
}

func (r *loadRun) close() error { return errors.Join(r.run.Stop(), r.w.Close()) }

// fsyncProbe writes a page and fdatasyncs it every 50 ms until stop,
// returning each round's time (none if the file cannot be made).
func fsyncProbe(path string, stop <-chan struct{}) []time.Duration {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil
	}
	defer os.Remove(path)
	defer f.Close()
	page := make([]byte, 4096)
	var out []time.Duration
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return out
		case <-tick.C:
		}
		t := time.Now()
		if _, err := f.WriteAt(page, 0); err != nil {
			return out
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return out
		}
		out = append(out, time.Since(t))
	}
}

func pct(sorted []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// processCPU is this process's user+system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// allocCounters are the heap's cumulative object and byte allocations.
func allocCounters() (objects, bytes uint64) {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}, {Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

// processRSS reads VmRSS and VmHWM (peak) from /proc/self/status (0 elsewhere).
func processRSS() (rss, peak uint64) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseUint(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb << 10
		case "VmHWM:":
			peak = kb << 10
		}
	}
	return rss, peak
}

// Run runs one profile from scratch (fresh store, emulator and bot).
func Run(ctx context.Context, p Profile, log zerolog.Logger, cpuProfile io.Writer) (Result, error) {
	dir, err := os.MkdirTemp("", "agentbot-load-")
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(dir)
	r, err := newLoadRun(ctx, dir, p, log)
	if err != nil {
		return Result{}, fmt.Errorf("load %s: %w", p.Name, err)
	}
	res, err := r.drive(ctx, cpuProfile)
	if cerr := r.close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return res, fmt.Errorf("load %s: %w", p.Name, err)
	}
	return res, nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond)) }

func mib(b uint64) string { return fmt.Sprintf("%.0f", float64(b)/(1<<20)) }

// PrintTable prints results as one table.
func PrintTable(w io.Writer, rs []Result) {
	fmt.Fprintf(w, "%-22s %5s %5s %7s %7s %6s %6s %6s %7s %8s %9s %8s %6s %6s %5s %4s %7s %7s\n",
		"profile", "conv", "guild", "offer/s", "turns/s", "p50ms", "p95ms", "p99ms", "maxms", "cpu-ms/t", "allocs/t", "KiB/t", "heapMB", "rssMB", "429s", "lost", "fsync50", "fsync99")
	for _, r := range rs {
		p := r.Profile
		fmt.Fprintf(w, "%-22s %5d %5d %7.0f %7.1f %6s %6s %6s %7s %8.3f %9.0f %8.1f %6s %6s %5d %4d %7s %7s\n",
			p.Name, p.Conversations, p.Guilds, p.Rate, r.TurnsPerSec, ms(r.P50), ms(r.P95), ms(r.P99), ms(r.Max),
			float64(r.CPUPerTurn)/float64(time.Millisecond), r.AllocsPerTurn, r.BytesPerTurn/1024, mib(r.HeapInuse), mib(r.RSS), r.Status429, r.Lost,
			ms(r.FsyncP50), ms(r.FsyncP99))
	}
	for _, r := range rs {
		if r.Profile.Memory {
			fmt.Fprintf(w, "%-22s recall index lag (entry written -> indexed): p50 %s ms, p99 %s ms over %d entries\n",
				r.Profile.Name, ms(r.IndexLagP50), ms(r.IndexLagP99), r.IndexLagN)
		}
	}
	fmt.Fprintln(w, "latency: bot-added (MESSAGE_CREATE handed to the gateway -> reply POST leaving the bot, minus model time);")
	fmt.Fprintln(w, "cpu, allocs, heap, rss: the whole process (bot + emulator + driver); fsync: a probe's write+fdatasync on the store's disk;")
	fmt.Fprintln(w, "see the README's performance section.")
}

// startMeasure opens the measured window (replies and, with Memory, the
// entries whose index lag counts) and returns its start.
func (r *loadRun) startMeasure() time.Time {
	r.lagMu.Lock()
	r.lagFrom = time.Now()
	r.lagMu.Unlock()
	r.measure.Store(true)
	return time.Now()
}

// stopMeasure closes the measured window.
func (r *loadRun) stopMeasure() {
	r.lagMu.Lock()
	r.lagTo = time.Now()
	r.lagMu.Unlock()
	r.measure.Store(false)
}

// indexLags (Memory) waits up to 30 s for the indexer to catch up with the
// window's writes, then sets res's index lag figures.
func (r *loadRun) indexLags(ctx context.Context, res *Result) {
	if !r.p.Memory {
		return
	}
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	deadline := time.Now().Add(30 * time.Second)
	last := -1
	for time.Now().Before(deadline) {
		r.lagMu.Lock()
		n := len(r.lags)
		r.lagMu.Unlock()
		if n == last && n > 0 {
			break // nothing new in the last tick: caught up
		}
		last = n
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
	r.lagMu.Lock()
	lags := slices.Clone(r.lags)
	r.lagMu.Unlock()
	slices.Sort(lags)
	res.IndexLagN = len(lags)
	if len(lags) > 0 {
		res.IndexLagP50, res.IndexLagP99 = pct(lags, 50), pct(lags, 99)
	}
}

// StandardProfiles are what `make load` runs.
func StandardProfiles(d time.Duration) []Profile {
	return []Profile{
		{Name: "standard", Conversations: 500, Guilds: 25, Rate: 100, Duration: d},
		{Name: "standard+model200ms", Conversations: 500, Guilds: 25, Rate: 100, Duration: d, ModelLatency: 200 * time.Millisecond},
	}
}
