package bot

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/internal/dendritetest"
)

// TestMatrixScenario is the randomized scenario on a real Dendrite: two
// people in two rooms mention the bot, chat past it, spawn subagents into
// threads and talk in them, edit and redact their messages and the bot's,
// /reset, add and run in-chat and background jobs, while the homeserver's
// answers to the bot fail (a 500, a 429, a send stored but its answer
// lost) and the bot restarts, sometimes with its /sync token rewound to an
// earlier batch (a crash between handling events and saving the token, so
// the homeserver hands them again). Then Rule 1 is checked against what a
// person's client displays. One seed in `make test`; `make soak` runs
// SOAK_SEEDS; SCENARIO_SEED=<n> re-runs one.
func TestMatrixScenario(t *testing.T) {
	seeds, steps := scenarioSeeds(t, 24, 50)
	if os.Getenv("SOAK") == "" && os.Getenv("SCENARIO_SEED") == "" {
		seeds = seeds[:1] // one homeserver seed in make test
	}
	w := newMxWorld(t) // one homeserver for every seed; each seed has its own rooms, store and token
	bob := w.srv.Register(t, "bob", false)
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			runMatrixScenario(t, w, bob, seed, steps)
			if t.Failed() {
				t.Logf("reproduce with: SCENARIO_SEED=%d go test -race -run 'TestMatrixScenario' ./bot/", seed)
			}
		})
	}
}

// mxScenario is one randomized Matrix run's world.
type mxScenario struct {
	t      *testing.T
	ctx    context.Context
	rng    *rand.Rand
	w      *mxWorld
	h      *harness
	proxy  *mxFaultProxy
	token  string   // the bot's /sync token file
	saved  [][]byte // earlier contents of the token file, for rewinds
	rooms  []string
	people []dendritetest.User
	said   []mxSaid // user messages that may be edited or redacted
	log    []string
	n      int
}

type mxSaid struct {
	room, thread, id string
	by               dendritetest.User
}

func (s *mxScenario) note(format string, args ...any) {
	s.log = append(s.log, fmt.Sprintf(format, args...))
}

func runMatrixScenario(t *testing.T, w *mxWorld, bob dendritetest.User, seed uint64, steps int) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	rng := rand.New(rand.NewPCG(seed, seed^0x5bd1e995))
	streaming := rng.IntN(2) == 0
	proxy := newMxFaultProxy(t, w.srv.URL)
	dir := t.TempDir()
	s := &mxScenario{t: t, ctx: ctx, rng: rng, w: w, proxy: proxy, token: filepath.Join(dir, "matrix-sync.token"),
		people: []dendritetest.User{w.alice, bob}}
	for range 2 {
		s.rooms = append(s.rooms, s.newRoom(bob))
	}
	log := zerolog.Nop()
	if os.Getenv("SCENARIO_LOG") != "" {
		log = zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	}
	h, err := newHarness(harnessOptions{Dir: dir, Log: log, Configure: func(c *config.Config) {
		w.configure(c)
		c.Matrix.Homeserver = proxy.srv.URL // the bot reaches the homeserver through the faults
		c.Matrix.SyncTokenFile = s.token
		c.Discord.Token = "" // Matrix only
		c.Discord.Access.RateLimit.Turns = 0
		c.Subagents.MaxConcurrent = 50
		mc := c.Models[config.DefaultModelName]
		mc.Stream = streaming
		c.Models[config.DefaultModelName] = mc
	}})
	if err != nil {
		t.Fatal(err)
	}
	s.h = h
	defer func() { _ = h.close() }()
	if err := h.start(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first /sync", func() bool { _, err := os.Stat(s.token); return err == nil })
	s.note("seed %d, streaming=%v, rooms %v", seed, streaming, s.rooms)
	defer func() {
		if t.Failed() {
			t.Logf("scenario steps:\n  %s", strings.Join(s.log, "\n  "))
		}
	}()
	actions := []struct {
		weight int
		run    func() error
	}{
		{6, s.mention},
		{2, s.chatter},
		{4, s.threadMessage},
		{3, s.spawn},
		{2, s.edit},
		{1, s.redactUser},
		{1, s.redactBot},
		{1, s.askThenRedact},
		{1, s.reset},
		{2, s.job},
		{2, s.fault},
		{2, s.restart},
	}
	total := 0
	for _, a := range actions {
		total += a.weight
	}
	for i := range steps {
		if b, err := os.ReadFile(s.token); err == nil {
			s.saved = append(s.saved, b)
		}
		n := rng.IntN(total)
		for _, a := range actions {
			if n < a.weight {
				if err := a.run(); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				break
			}
			n -= a.weight
		}
	}
	// A graceful stop drains every turn; one more start (no faults) takes
	// what was still on its way, then a last message in each room, answered,
	// shows every earlier event was handled.
	if err := h.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	proxy.clear()
	if err := h.start(ctx); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(s.token)
	for i, room := range s.rooms {
		s.sayIn(w.alice, room, "", fmt.Sprintf("bot: final %d", i), true)
	}
	waitFor(t, "the answers to the last messages", func() bool {
		d := w.display(t, s.rooms...)
		for i, room := range s.rooms {
			answered := false
			for _, m := range d.Messages(room) {
				answered = answered || (m.FromBot && strings.Contains(m.Content, fmt.Sprintf("final %d", i)))
			}
			if !answered {
				return false
			}
		}
		b, _ := os.ReadFile(s.token)
		return !bytes.Equal(b, before)
	})
	var convs []string
	d := w.display(t, s.rooms...)
	for _, room := range s.rooms {
		convs = append(convs, d.threadsOf(room)...)
	}
	finishMatrixBot(t, h, w, s.rooms, convs...)
}

// newRoom: alice creates a private room, invites the bot and bob; both join.
func (s *mxScenario) newRoom(bob dendritetest.User) string {
	var created struct {
		RoomID string `json:"room_id"`
	}
	s.w.do(s.t, s.w.alice.AccessToken, "POST", "/createRoom", map[string]any{"preset": "private_chat", "invite": []string{s.w.bot.UserID, bob.UserID}}, &created)
	for _, u := range []dendritetest.User{s.w.bot, bob} {
		s.w.do(s.t, u.AccessToken, "POST", "/join/"+url.PathEscape(created.RoomID), map[string]any{}, nil)
	}
	return created.RoomID
}

func (s *mxScenario) pick(xs []string) string { return xs[s.rng.IntN(len(xs))] }

func (s *mxScenario) person() dendritetest.User { return s.people[s.rng.IntN(len(s.people))] }

// sayIn posts text as u (in thread, if set) and returns its event id.
func (s *mxScenario) sayIn(u dendritetest.User, room, thread, text string, mention bool) string {
	content := map[string]any{"msgtype": "m.text", "body": text, "m.mentions": map[string]any{}}
	if mention {
		content["m.mentions"] = map[string]any{"user_ids": []string{s.w.bot.UserID}}
	}
	if thread != "" {
		content["m.relates_to"] = map[string]any{"rel_type": "m.thread", "event_id": thread, "is_falling_back": true,
			"m.in_reply_to": map[string]any{"event_id": thread}}
	}
	var sent struct {
		EventID string `json:"event_id"`
	}
	path := fmt.Sprintf("/rooms/%s/send/m.room.message/s%d", url.PathEscape(room), s.w.txn.Add(1))
	s.w.do(s.t, u.AccessToken, "PUT", path, content, &sent)
	return sent.EventID
}

func (s *mxScenario) say(u dendritetest.User, room, thread, text string, mention bool) string {
	id := s.sayIn(u, room, thread, text, mention)
	s.said = append(s.said, mxSaid{room: room, thread: thread, id: id, by: u})
	return id
}

func (s *mxScenario) next() int { s.n++; return s.n }

func (s *mxScenario) mention() error {
	room, u := s.pick(s.rooms), s.person()
	id := s.say(u, room, "", fmt.Sprintf("bot: note %d", s.next()), true)
	s.note("mention %s in %s by %s", id, room, u.UserID)
	return nil
}

func (s *mxScenario) chatter() error {
	room := s.pick(s.rooms)
	id := s.say(s.person(), room, "", fmt.Sprintf("just chatting %d", s.next()), false)
	s.note("chatter %s in %s", id, room)
	return nil
}

// threads are the thread roots of the rooms that hold messages.
func (s *mxScenario) threads() [][2]string {
	var out [][2]string
	d := s.w.display(s.t, s.rooms...)
	for _, room := range s.rooms {
		for _, root := range d.threadsOf(room) {
			out = append(out, [2]string{room, root})
		}
	}
	return out
}

func (s *mxScenario) threadMessage() error {
	ths := s.threads()
	if len(ths) == 0 {
		return s.mention()
	}
	th := ths[s.rng.IntN(len(ths))]
	id := s.say(s.person(), th[0], th[1], fmt.Sprintf("bot: follow-up %d", s.next()), true)
	s.note("thread message %s in %s/%s", id, th[0], th[1])
	return nil
}

func (s *mxScenario) spawn() error {
	room := s.pick(s.rooms)
	n := s.next()
	text := fmt.Sprintf("!spawn task %d label=l%d", n, n)
	if s.rng.IntN(3) > 0 {
		text += " thread=true"
	}
	id := s.sayIn(s.person(), room, "", text, false)
	s.note("%s (%s) in %s", text, id, room)
	return nil
}

// edit replaces the text of an earlier user message, sometimes addressing
// the bot where it did not before.
func (s *mxScenario) edit() error {
	if len(s.said) == 0 {
		return s.mention()
	}
	m := s.said[s.rng.IntN(len(s.said))]
	body := fmt.Sprintf("bot: edited %d", s.next())
	if s.rng.IntN(3) == 0 {
		body = fmt.Sprintf("never mind %d", s.n)
	}
	mentions := map[string]any{} // an edit to "bot: ..." addresses the bot, as a client's would
	if strings.HasPrefix(body, "bot: ") {
		mentions["user_ids"] = []string{s.w.bot.UserID}
	}
	content := map[string]any{"msgtype": "m.text", "body": "* " + body, "m.mentions": mentions,
		"m.new_content": map[string]any{"msgtype": "m.text", "body": body, "m.mentions": mentions},
		"m.relates_to":  map[string]any{"rel_type": "m.replace", "event_id": m.id}}
	path := fmt.Sprintf("/rooms/%s/send/m.room.message/s%d", url.PathEscape(m.room), s.w.txn.Add(1))
	s.note("edit %s in %s to %q", m.id, m.room, body)
	return s.w.request(s.ctx, m.by.AccessToken, "PUT", path, content, nil)
}

func (s *mxScenario) redact(room, id string) error {
	path := fmt.Sprintf("/rooms/%s/redact/%s/r%d", url.PathEscape(room), url.PathEscape(id), s.w.txn.Add(1))
	return s.w.request(s.ctx, s.w.alice.AccessToken, "PUT", path, map[string]any{"reason": "scenario"}, nil)
}

func (s *mxScenario) redactUser() error {
	if len(s.said) == 0 {
		return nil
	}
	i := s.rng.IntN(len(s.said))
	m := s.said[i]
	s.said = append(s.said[:i], s.said[i+1:]...)
	s.note("redact user message %s in %s", m.id, m.room)
	return s.redact(m.room, m.id) // alice made the rooms: she may redact anyone's message
}

func (s *mxScenario) redactBot() error {
	d := s.w.display(s.t, s.rooms...)
	type located struct{ room, id string }
	var bots []located
	for _, room := range s.rooms {
		for _, m := range d.Messages(room) {
			if m.FromBot {
				bots = append(bots, located{room, m.ID})
			}
		}
		for _, root := range d.threadsOf(room) {
			for _, m := range d.Messages(root) {
				if m.FromBot {
					bots = append(bots, located{room, m.ID})
				}
			}
		}
	}
	if len(bots) == 0 {
		return nil
	}
	b := bots[s.rng.IntN(len(bots))]
	s.note("redact bot message %s in %s", b.id, b.room)
	return s.redact(b.room, b.id)
}

// askThenRedact addresses the bot and redacts the question at once, while
// its turn may be running.
func (s *mxScenario) askThenRedact() error {
	room := s.pick(s.rooms)
	id := s.sayIn(s.w.alice, room, "", fmt.Sprintf("bot: secret %d", s.next()), true)
	s.note("ask %s then redact it in %s", id, room)
	return s.redact(room, id)
}

func (s *mxScenario) reset() error {
	room := s.pick(s.rooms)
	s.note("!reset in %s", room)
	s.sayIn(s.person(), room, "", "!reset", false)
	return nil
}

// job adds an in-chat or a background job as alice (an operator of her
// room) and runs it at once.
func (s *mxScenario) job() error {
	room := s.pick(s.rooms)
	target := "main"
	if s.rng.IntN(2) == 0 {
		target = "isolated"
	}
	n := s.next()
	reply := s.w.command(s.t, room, fmt.Sprintf(`!cron add job %d schedule="every 1h" target=%s`, n, target), "added")
	id := jobID(s.t, reply)
	s.note("job %s (%s) in %s, run now", id, target, room)
	s.sayIn(s.w.alice, room, "", "!cron run "+id, false)
	return nil
}

func (s *mxScenario) fault() error {
	f := mxFault{method: "PUT", path: "/send/m.room.message/"}
	switch s.rng.IntN(4) {
	case 0:
		f.status = 500
	case 1:
		f.status = 429
	case 2:
		f.dropAfterCommit = true
	default:
		f.path, f.dropAfterCommit = "/redact/", false
		f.status = 502
	}
	s.note("fault %+v", f)
	s.proxy.inject(f)
	return nil
}

// restart stops the bot gracefully and starts it again; sometimes with its
// /sync token rewound to one it saved earlier.
func (s *mxScenario) restart() error {
	if err := s.h.stop(); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	if len(s.saved) > 0 && s.rng.IntN(2) == 0 {
		i := s.rng.IntN(len(s.saved))
		if err := os.WriteFile(s.token, s.saved[i], 0o600); err != nil {
			return err
		}
		s.note("restart with the /sync token rewound %d steps", len(s.saved)-i)
	} else {
		s.note("restart")
	}
	return s.h.start(s.ctx)
}

// mxFault is one failure the proxy gives the bot: the first request whose
// method and path match is answered with status, or (dropAfterCommit)
// passed on to the homeserver and its answer lost.
type mxFault struct {
	method, path    string
	status          int
	dropAfterCommit bool
}

// mxFaultProxy stands between the bot and the homeserver and fails the
// requests it is told to, once each.
type mxFaultProxy struct {
	srv    *httptest.Server
	target string
	mu     sync.Mutex
	faults []mxFault
}

func newMxFaultProxy(t *testing.T, target string) *mxFaultProxy {
	p := &mxFaultProxy{target: target}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *mxFaultProxy) inject(f mxFault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = append(p.faults, f)
}

func (p *mxFaultProxy) clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = nil
}

// take removes and returns the first fault matching r.
func (p *mxFaultProxy) take(r *http.Request) (mxFault, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, f := range p.faults {
		if r.Method == f.method && strings.Contains(r.URL.Path, f.path) {
			p.faults = append(p.faults[:i], p.faults[i+1:]...)
			return f, true
		}
	}
	return mxFault{}, false
}

func (p *mxFaultProxy) serve(w http.ResponseWriter, r *http.Request) {
	f, faulty := p.take(r)
	if faulty && !f.dropAfterCommit {
		w.Header().Set("Content-Type", "application/json")
		if f.status == http.StatusTooManyRequests {
			w.WriteHeader(f.status)
			_, _ = io.WriteString(w, `{"errcode":"M_LIMIT_EXCEEDED","error":"injected","retry_after_ms":20}`)
			return
		}
		w.WriteHeader(f.status)
		_, _ = io.WriteString(w, `{"errcode":"M_UNKNOWN","error":"injected"}`)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, p.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if faulty { // the homeserver took it; the bot never hears
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				if tc, ok := conn.(*net.TCPConn); ok {
					_ = tc.SetLinger(0)
				}
				_ = conn.Close()
				return
			}
		}
		http.Error(w, "lost", http.StatusBadGateway)
		return
	}
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(data)
}
