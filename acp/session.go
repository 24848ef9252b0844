package acp

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/transcript"
)

// prompt is one queued message for the agent.
type prompt struct {
	text      string
	user      string
	messageID string
	// warm: no text; just start the agent (a session bound without a task).
	warm bool
}

// session is one bound ACP session: its worker runs the queued prompts
// one at a time and owns the agent process.
type session struct {
	m  *Manager
	ac AgentConfig

	mu      sync.Mutex
	rec     sessionRecord
	conn    *conn
	turn    *turn
	queue   []prompt
	wake    chan struct{}
	started bool
	crashes int  // consecutive crashes (restart backoff)
	loading bool // session/load replays history: not displayed
	closed  bool
	refused map[string]bool // users told their messages do not reach the agent
}

// noteRefused reports whether user is to be told (once) that their
// messages do not reach the agent.
func (s *session) noteRefused(user string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refused == nil {
		s.refused = map[string]bool{}
	}
	if s.refused[user] {
		return false
	}
	s.refused[user] = true
	return true
}

func newSession(m *Manager, ac AgentConfig, rec sessionRecord) *session {
	return &session{m: m, ac: ac, rec: rec, wake: make(chan struct{}, 1)}
}

// running: its agent process runs.
func (s *session) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conn != nil
}

// alive: its agent process runs, or is about to (a prompt is queued or running).
func (s *session) alive() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.closed && (s.conn != nil || s.turn != nil || len(s.queue) > 0)
}

func (s *session) enqueue(p prompt) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.queue = append(s.queue, p)
	if !s.started {
		s.started = true
		s.m.wg.Add(1)
		go s.work(s.m.runCtx())
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// work runs queued prompts until the manager stops.
func (s *session) work(ctx context.Context) {
	defer s.m.wg.Done()
	for {
		s.mu.Lock()
		var t *turn
		have := len(s.queue) > 0
		if have {
			// The turn is set as the prompt leaves the queue: the session
			// counts as alive (MaxSessions) throughout.
			t, s.queue = newTurn(s, s.queue[0]), s.queue[1:]
			s.turn = t
		}
		s.mu.Unlock()
		if !have {
			var idle <-chan time.Time
			if s.ac.IdleTimeout > 0 && s.running() {
				idle = s.m.opt.After(s.ac.IdleTimeout)
			}
			select {
			case <-ctx.Done():
				return
			case <-s.wake:
			case <-idle:
				s.stopProcess()
				s.m.log.Info().Str("session", s.rec.Key).Dur("idle", s.ac.IdleTimeout).Msg("acp agent idle: stopped")
			}
			continue
		}
		if ctx.Err() != nil {
			s.mu.Lock()
			s.turn = nil
			s.mu.Unlock()
			close(t.ended) // never ran: nothing to finish
			return
		}
		s.run(ctx, t)
	}
}

// stopProcess ends the agent process (bounded); the session stays bound.
func (s *session) stopProcess() {
	s.mu.Lock()
	c := s.conn
	s.conn = nil
	s.mu.Unlock()
	if c != nil {
		c.close()
	}
}

// shutdown closes the session, cancels its turn and stops its agent. The
// channel it returns is closed once that turn's messages are finished
// (displayed and recorded); at once when no turn ran.
func (s *session) shutdown() <-chan struct{} {
	s.mu.Lock()
	s.closed = true
	t := s.turn
	s.mu.Unlock()
	s.cancel()
	s.stopProcess()
	if t == nil {
		done := make(chan struct{})
		close(done)
		return done
	}
	return t.ended
}

// ensure returns a running, initialised agent with the session open:
// started (after a backoff when it crashed before), then session/new, or
// session/load for a session it had (when it offers loadSession).
func (s *session) ensure(ctx context.Context) (*conn, error) {
	s.mu.Lock()
	c := s.conn
	crashes := s.crashes
	s.mu.Unlock()
	if c != nil {
		select {
		case <-c.proc.Done():
			c.close() // the commands of the agent that exited end with it
		default:
			return c, nil
		}
	}
	if crashes > 0 {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-s.m.opt.After(s.m.opt.Backoff(crashes)):
		}
	}
	pc, ws, term, proxy, err := s.processConfig(ctx)
	if err != nil {
		return nil, err
	}
	ictx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	c, err = dial(ictx, pc, ws, s, term)
	if err != nil {
		if proxy != nil {
			proxy.close()
		}
		s.noteCrash()
		return nil, err
	}
	c.proxy = proxy
	s.mu.Lock()
	s.conn = c
	prev := s.rec.ACPSessionID
	s.mu.Unlock()
	lost := false
	if prev != "" && c.caps.LoadSession {
		s.setLoading(true)
		_, err := c.c.LoadSession(ictx, sdk.LoadSessionRequest{SessionId: sdk.SessionId(prev), Cwd: ws.Root(), McpServers: []sdk.McpServer{}})
		s.setLoading(false)
		if err == nil {
			return c, nil
		}
		s.m.log.Warn().Err(err).Str("session", s.rec.Key).Msg("acp session/load failed; starting a new session")
		lost = true
	} else if prev != "" {
		lost = true
	}
	ns, err := c.c.NewSession(ictx, sdk.NewSessionRequest{Cwd: ws.Root(), McpServers: []sdk.McpServer{}})
	if err != nil {
		c.close()
		s.mu.Lock()
		s.conn = nil
		s.mu.Unlock()
		s.noteCrash()
		return nil, fmt.Errorf("session/new: %w", agentErr(err, c.proc))
	}
	s.mu.Lock()
	s.rec.ACPSessionID = string(ns.SessionId)
	rec := s.rec
	s.mu.Unlock()
	if err := s.m.saveRecord(s.ac, rec); err != nil {
		s.m.log.Error().Err(err).Str("session", rec.Key).Msg("acp session record not saved")
	}
	if lost {
		text := fmt.Sprintf("ℹ️ **%s** was restarted and cannot reload its earlier session here: its context of this thread's earlier messages is lost (what is displayed stays).", s.ac.Name)
		if err := s.m.d.Notices.Notify(ctx, rec.Conversation, "acp-lost:"+rec.Key+":"+string(ns.SessionId), text, transcript.SourceNotice, s.ac.Name); err != nil {
			s.m.log.Warn().Err(err).Str("session", rec.Key).Msg("acp context-lost notice not posted")
		}
	}
	return c, nil
}

// processConfig is how the session's agent process starts: its workspace and home (made from the conversation id),
// its environment, the sandbox around it (with the endpoint proxy it relays through, if any), the terminals it may
// run commands in, and the process tracker.
func (s *session) processConfig(ctx context.Context) (pc ProcessConfig, ws *Workspace, term *terminals, proxy *endpointProxy, err error) {
	// The directories are made from the conversation id each time (never
	// from the record's Dir, which an older version wrote unescaped).
	wsDir, err := sessionDir(s.ac, s.rec.Conversation.ConversationID)
	if err != nil {
		return ProcessConfig{}, nil, nil, nil, err
	}
	homeDir, err := homeDir(s.ac, s.rec.Conversation.ConversationID)
	if err != nil {
		return ProcessConfig{}, nil, nil, nil, err
	}
	ws, err = NewWorkspace(wsDir)
	if err != nil {
		return ProcessConfig{}, nil, nil, nil, err
	}
	home, err := NewWorkspace(homeDir)
	if err != nil {
		return ProcessConfig{}, nil, nil, nil, err
	}
	env := AgentEnv(s.ac.Env, home.Root())
	pc = ProcessConfig{Command: s.ac.Command, Args: s.ac.Args, Env: env, Dir: ws.Root(), Grace: s.m.opt.Grace, KillAfter: s.m.opt.KillAfter}
	if sb := s.ac.Commands.Sandbox; sb != nil {
		// The agent's HOME is its own directory, or the one configured in its env.
		h := home.Root()
		for _, e := range env {
			if v, ok := strings.CutPrefix(e, "HOME="); ok && filepath.IsAbs(v) {
				h = v
			}
		}
		sp := SandboxPaths{Workspace: ws.Root(), Home: h}
		if len(sb.Relay) > 0 {
			if proxy, err = startEndpointProxy(endpointsOf(s.ac.Env), s.m.log.With().Str("session", s.rec.Key).Logger()); err != nil {
				return ProcessConfig{}, nil, nil, nil, err
			}
			sp.NetDir = proxy.dir
			pc.Env = append(append([]string{}, env...), proxyEnv()...)
		}
		argv := sb.WrapAgent(append([]string{s.ac.Command}, s.ac.Args...), sp)
		pc.Command, pc.Args = argv[0], argv[1:]
	}
	if s.ac.Terminal {
		term = &terminals{ws: ws, env: env, opt: s.ac.Commands, grace: s.m.opt.KillAfter, after: s.m.opt.After, now: s.m.d.Clock.Now,
			hooks: s, metrics: s.m.d.Commands}
		if term.grace <= 0 {
			term.grace = 3 * time.Second
		}
		if tr := s.m.d.Procs; tr != nil {
			term.track = func(pid int) func() { return tr.Started(context.WithoutCancel(ctx), pid, "command", s.ac.Name) }
		}
	}
	if tr := s.m.d.Procs; tr != nil {
		pc.Track = func(pid int) func() { return tr.Started(context.WithoutCancel(ctx), pid, "acp", s.ac.Name) }
	}
	return pc, ws, term, proxy, nil
}

func (s *session) save(rec sessionRecord) {
	if err := s.m.saveRecord(s.ac, rec); err != nil {
		s.m.log.Error().Err(err).Str("session", rec.Key).Msg("acp session record not saved")
	}
}

// clearInFlight records that turn seq ended (unless another began).
func (s *session) clearInFlight(seq string) {
	s.mu.Lock()
	if s.rec.TurnInFlight != seq {
		s.mu.Unlock()
		return
	}
	s.rec.TurnInFlight = ""
	rec := s.rec
	s.mu.Unlock()
	s.save(rec)
}

func (s *session) noteCrash() {
	s.mu.Lock()
	s.crashes++
	s.mu.Unlock()
}

func (s *session) setLoading(v bool) {
	s.mu.Lock()
	s.loading = v
	s.mu.Unlock()
}

// run is one turn: the prompt to the agent, its output as live messages,
// the turn's entries written when it ends.
func (s *session) run(ctx context.Context, t *turn) {
	p := t.p
	s.mu.Lock()
	if !p.warm {
		s.rec.TurnInFlight = t.seq
	}
	rec := s.rec
	s.mu.Unlock()
	if !p.warm {
		s.save(rec)
	}
	defer func() {
		s.mu.Lock()
		s.turn = nil
		s.mu.Unlock()
		// A shutdown (SIGTERM, the manager's context ended) is a terminal,
		// visible state of the turn (invariant 16): it ends with a notice,
		// as a SIGKILL's turn does at the next start. The in-flight marker
		// is cleared only once everything, the notice included, is
		// displayed and recorded; otherwise the next start reports it.
		stopping := ctx.Err() != nil && !p.warm
		if stopping {
			t.line(context.WithoutCancel(ctx), fmt.Sprintf("⚠️ The bot is shutting down: **%s**'s turn here was interrupted. Send your message again once the bot is back.", s.ac.Name))
		}
		err := t.finish(ctx)
		if !p.warm && (!stopping || err == nil) {
			s.clearInFlight(t.seq)
		}
		close(t.ended)
	}()
	c, err := s.ensure(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.m.log.Error().Err(err).Str("session", s.rec.Key).Msg("acp agent did not start")
			t.line(ctx, fmt.Sprintf("⚠️ **%s** could not be started (%s); the bot logged the details. Your next message tries again.", s.ac.Name, startReason(err)))
		}
		return
	}
	if p.warm {
		return
	}
	t.setConn(c)
	done := make(chan struct{})
	var resp sdk.PromptResponse
	var perr error
	go func() {
		defer close(done)
		resp, perr = c.c.Prompt(ctx, sdk.PromptRequest{SessionId: sdk.SessionId(s.sessionID()), Prompt: []sdk.ContentBlock{sdk.TextBlock(p.text)}})
	}()
	var crashed bool
	select {
	case <-done:
	case <-c.proc.Done():
		crashed = true
		<-done
		// What it said before it died is shown before the turn ends.
		c.updates.drained(s.m.opt.After, updateDrainWait)
	case <-t.killed:
		// Cancelled and the agent did not end the turn in time.
		c.close()
		crashed = true
		<-done
	}
	if !crashed && perr != nil {
		select {
		case <-c.c.Done():
			// The agent closed its end: it is exiting. Stop reaps it
			// (bounded) so its exit status can be told.
			c.close()
			crashed = true
			c.updates.drained(s.m.opt.After, updateDrainWait)
		case <-c.proc.Done():
			crashed = true
			c.updates.drained(s.m.opt.After, updateDrainWait)
		default:
		}
	}
	if ctx.Err() != nil {
		return // shutting down: the deferred notice says so
	}
	t.resolvePerms()
	s.ended(ctx, t, c, resp, perr, crashed)
}

// ended tells the thread how turn t ended: the agent crashed (or was ended),
// its prompt failed, or it answered with stop reason resp.StopReason.
func (s *session) ended(ctx context.Context, t *turn, c *conn, resp sdk.PromptResponse, perr error, crashed bool) {
	switch {
	case crashed:
		c.close() // its commands end with it
		s.mu.Lock()
		if s.conn == c {
			s.conn = nil
		}
		s.crashes++
		s.mu.Unlock()
		why := exitText(c.proc.Err())
		s.m.log.Warn().Str("session", s.rec.Key).Str("exit", why).Str("stderr", c.proc.Stderr()).Msg("acp agent ended mid-turn")
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		if closed {
			t.line(ctx, fmt.Sprintf("⏹️ Stopped: this **%s** session ended.", s.ac.Name))
		} else if t.wasCancelled() {
			t.line(ctx, fmt.Sprintf("⏹️ Stopped: **%s** did not stop its turn in time and was ended. Your next message starts it again.", s.ac.Name))
		} else {
			t.line(ctx, fmt.Sprintf("⚠️ **%s** stopped unexpectedly (%s); this turn ended. Your next message starts it again.", s.ac.Name, why))
		}
	case perr != nil:
		s.m.log.Warn().Err(perr).Str("session", s.rec.Key).Msg("acp prompt failed")
		t.line(ctx, fmt.Sprintf("⚠️ **%s** answered with an error; this turn ended. The bot logged the details.", s.ac.Name))
	default:
		s.mu.Lock()
		s.crashes = 0
		s.mu.Unlock()
		switch {
		case resp.StopReason == sdk.StopReasonCancelled || t.wasCancelled():
			t.line(ctx, "⏹️ Stopped.")
		case resp.StopReason == sdk.StopReasonMaxTokens || resp.StopReason == sdk.StopReasonMaxTurnRequests:
			t.line(ctx, fmt.Sprintf("ℹ️ **%s** stopped: it reached its limit (%s).", s.ac.Name, resp.StopReason))
		case resp.StopReason == sdk.StopReasonRefusal:
			t.line(ctx, fmt.Sprintf("ℹ️ **%s** declined to continue.", s.ac.Name))
		}
	}
}

func startReason(err error) string {
	if errors.Is(err, ErrAgentExited) {
		return "it exited during start-up"
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "it did not answer initialize in time"
	}
	return "it could not be run"
}

func (s *session) sessionID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rec.ACPSessionID
}

// cancel sends session/cancel for the running turn; false when idle.
func (s *session) cancel() bool {
	s.mu.Lock()
	t := s.turn
	s.mu.Unlock()
	if t == nil {
		return false
	}
	return t.cancel()
}

// update is a session/update from the agent.
func (s *session) update(ctx context.Context, n sdk.SessionNotification) {
	s.mu.Lock()
	t, loading := s.turn, s.loading
	s.mu.Unlock()
	if loading || t == nil {
		return // a replay of history (session/load), or nothing to show it in
	}
	t.update(s.m.runCtx(), n.Update)
}

// permission is a session/request_permission: a message with one button
// per option; the binder's or an operator's click answers it; no answer
// within the timeout is a reject.
func (s *session) permission(ctx context.Context, r sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
	s.mu.Lock()
	t := s.turn
	s.mu.Unlock()
	if t == nil {
		return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeCancelled()}, nil
	}
	return t.permission(ctx, r)
}

// turn is one prompt's display: its live messages in creation order.
type turn struct {
	s         *session
	p         prompt
	seq       string
	key       string // the session that owns the turn (its entries go there, whatever the thread routes to later)
	mu        sync.Mutex
	msgs      []*liveMsg
	text      *liveMsg // the answer segment chunks go to
	tools     map[sdk.ToolCallId]*liveMsg
	plan      *liveMsg
	perms     map[string]*pendingPerm
	cmds      map[string]*shownCmd // the commands it ran, by terminal id
	pacer     *delivery.Pacer      // one edit per EditInterval among the turn's messages
	release   func()               // ends the turn's hold on the thread's send lock (nil: not held)
	conn      *conn
	cancelled bool
	closed    bool           // finishing: no new permission requests
	permWG    sync.WaitGroup // permission requests being answered
	killed    chan struct{}  // closed when a cancel outlived CancelGrace
	killOnce  sync.Once
	ended     chan struct{} // closed once its messages are finished (run returned)
}

func newTurn(s *session, p prompt) *turn {
	seq := p.messageID
	if seq == "" {
		seq = newID()
	}
	return &turn{s: s, p: p, seq: seq, key: s.rec.Key, tools: map[sdk.ToolCallId]*liveMsg{}, perms: map[string]*pendingPerm{}, pacer: delivery.NewPacer(), killed: make(chan struct{}), ended: make(chan struct{})}
}

func (t *turn) setConn(c *conn) {
	t.mu.Lock()
	t.conn = c
	t.mu.Unlock()
}

func (t *turn) wasCancelled() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cancelled
}

// cancel: session/cancel, pending permissions answered "cancelled" (the
// protocol asks for it), and the agent killed if it does not end the turn
// within CancelGrace.
func (t *turn) cancel() bool {
	t.mu.Lock()
	if t.cancelled {
		t.mu.Unlock()
		return true
	}
	t.cancelled = true
	c := t.conn
	t.mu.Unlock()
	if c == nil {
		t.resolvePerms()
		return true
	}
	if c.term != nil {
		// A stopped turn's commands end now, whatever the agent does.
		for _, cmd := range c.term.running() {
			c.term.kill(cmd, "killed")
		}
	}
	ctx := t.s.m.runCtx()
	if err := c.c.Cancel(ctx, sdk.CancelNotification{SessionId: sdk.SessionId(t.s.sessionID())}); err != nil {
		t.s.m.log.Warn().Err(err).Str("session", t.s.rec.Key).Msg("acp session/cancel not sent")
	}
	t.resolvePerms()
	timer := t.s.m.opt.After(t.s.m.opt.CancelGrace)
	go func() {
		select {
		case <-timer:
			t.killOnce.Do(func() { close(t.killed) })
		case <-c.proc.Done():
		}
	}()
	return true
}

// resolvePerms answers every pending permission of the turn "cancelled".
func (t *turn) resolvePerms() {
	t.mu.Lock()
	ps := make([]*pendingPerm, 0, len(t.perms))
	for id, p := range t.perms {
		ps = append(ps, p)
		delete(t.perms, id)
	}
	t.mu.Unlock()
	m := t.s.m
	for _, p := range ps {
		m.mu.Lock()
		for id, q := range m.perms {
			if q == p {
				delete(m.perms, id)
			}
		}
		m.mu.Unlock()
		select {
		case p.answer <- choice{index: -1}:
		default:
		}
	}
}

// updateDrainWait bounds how long a turn whose agent died waits for the
// updates it sent to be handled (the SDK drains them within 5 s).
const updateDrainWait = 5 * time.Second
