package acp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	sdk "github.com/coder/acp-go-sdk"
	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/transcript"
)

// AgentConfig is one acp.agents.<name> entry.
type AgentConfig struct {
	Name    string
	Command string
	Args    []string
	// Env is the agent's configured environment (secrets already expanded).
	Env map[string]string
	// Workspace is the root; each bound session gets a directory under it.
	Workspace string
	// Users and Roles may start sessions and approve; both empty = operators only.
	Users, Roles []string
	// IdleTimeout stops an idle agent process (0 = never); the session
	// resumes with session/load at the next message.
	IdleTimeout time.Duration
	// MaxSessions caps concurrently running agent processes (0 = no cap).
	MaxSessions int
	// Terminal turns the terminal capability on: the agent may run
	// commands (terminal/*) as Commands says.
	Terminal bool
	Commands CommandOptions
}

// Live shows a turn's messages while they change: core/delivery's one
// live-message mechanism (Outbound.Live). Each displayed message is a live
// delivery of its own: posted with its buttons, edited paced, its text
// recorded in the outbox before every request, and its transcript entry
// written once by Finish (or by Outbound.Recover after a crash).
//
// Hold takes the conversation's send lock for the turn (Outbound.Hold):
// held from the turn's first post until its last entry is written, so
// nothing else is displayed or written in the thread in between and the
// transcript keeps display order (Rule 1), as a single live message does.
type Live interface {
	Live(ctx context.Context, d delivery.Delivery, opt delivery.LiveOptions) *delivery.Live
	Hold(ref binding.ConversationRef) (release func())
}

// Notifier posts one message that Outbound writes into the conversation's
// transcript (an intro, a notice outside a turn).
type Notifier interface {
	Notify(ctx context.Context, conv binding.ConversationRef, deliveryID, text string, source transcript.Source, agentID string) error
}

// Appender writes the turn's own entries (core/transcript.Service).
type Appender interface {
	Append(ctx context.Context, key string, e transcript.Entry) (transcript.Entry, error)
}

// Bindings is what the manager needs of core/binding.Service.
type Bindings interface {
	Bind(ctx context.Context, in binding.BindInput) (binding.Record, error)
	ResolveByConversation(ref binding.ConversationRef) (binding.Record, bool)
}

// Threads creates a thread under a channel.
type Threads interface {
	CreateThread(ctx context.Context, parent binding.ConversationRef, name string) (binding.ConversationRef, error)
}

// Authority is the one authority rule (core/authz.Authority).
type Authority interface {
	Operator(ctx context.Context, actor authz.Actor, target binding.ConversationRef) bool
	MayUseAgent(ctx context.Context, actor authz.Actor, users, roles []string, what string) error
}

// Options tune the manager.
type Options struct {
	Agents []AgentConfig
	// PermissionTimeout: no answer within it is a reject (default 5m).
	PermissionTimeout time.Duration
	// EditInterval: at most one edit per live message per interval (default 1s).
	EditInterval time.Duration
	// CancelGrace: how long a cancelled turn may take before the agent is
	// killed (default 15s).
	CancelGrace time.Duration
	// Grace and KillAfter bound an agent's shutdown (see Process.Stop).
	Grace, KillAfter time.Duration
	// Backoff is the wait before the n-th restart after a crash (n >= 1);
	// default 1s doubling to 30s.
	Backoff func(n int) time.Duration
	// After is the timer (nil = time.After); tests inject one.
	After func(d time.Duration) <-chan time.Time
	// Ready, if set, holds back the notices of turns a restart
	// interrupted until it is closed (cmd/bot: once Discord is connected
	// and Outbound.Recover has finished the interrupted messages, so the
	// notice can be posted and follows them in the thread and transcript).
	Ready <-chan struct{}
}

// Deps are the manager's collaborators.
type Deps struct {
	Live        Live
	Notices     Notifier
	Transcripts Appender
	Bindings    Bindings
	Threads     Threads
	Authority   Authority
	Clock       clock.Clock
	Log         zerolog.Logger
	// Procs records each agent's and command's process group (nil: none recorded).
	Procs Tracker
	// Commands counts the agents' commands.
	Commands CommandMetrics
}

// Tracker records started process groups (internal/procs.Registry).
type Tracker interface {
	Started(ctx context.Context, pid int, kind, name string) (release func())
}

// Errors the adapter turns into user-facing text.
var (
	ErrUnknownAgent = errors.New("no such ACP agent")
	ErrTooMany      = errors.New("too many agent sessions are running")
	ErrNotACP       = errors.New("this conversation is not bound to an ACP agent")
)

// KindACP is the binding target kind of an ACP session.
const KindACP = binding.KindACP

// SessionKey is the transcript key of an ACP session bound to a thread.
func SessionKey(agent, threadID string) string { return "agent:" + agent + ":acp:" + threadID }

// Manager runs ACP sessions: one supervised agent process per active
// session, the thread's messages as prompts, the agent's output as live
// messages, its permission requests as buttons.
type Manager struct {
	opt    Options
	d      Deps
	log    zerolog.Logger
	agents map[string]AgentConfig

	mu       sync.Mutex
	sessions map[string]*session // by session key
	perms    map[string]*pendingPerm
	ctx      context.Context // the manager's life (work outlives a request); ended by Run
	stopAll  context.CancelFunc
	wg       sync.WaitGroup
}

// New returns a manager; Run starts its work.
func New(opt Options, d Deps) *Manager {
	if opt.PermissionTimeout <= 0 {
		opt.PermissionTimeout = 5 * time.Minute
	}
	if opt.EditInterval <= 0 {
		opt.EditInterval = time.Second
	}
	if opt.CancelGrace <= 0 {
		opt.CancelGrace = 15 * time.Second
	}
	if opt.Backoff == nil {
		opt.Backoff = func(n int) time.Duration { return min(time.Second<<min(n-1, 5), 30*time.Second) }
	}
	if opt.After == nil {
		opt.After = time.After
	}
	if d.Clock == nil {
		d.Clock = clock.Real{}
	}
	m := &Manager{opt: opt, d: d, log: d.Log, agents: map[string]AgentConfig{}, sessions: map[string]*session{}, perms: map[string]*pendingPerm{}}
	m.ctx, m.stopAll = context.WithCancel(context.Background())
	for _, a := range opt.Agents {
		m.agents[a.Name] = a
	}
	return m
}

// Has reports whether name is a configured ACP agent.
func (m *Manager) Has(name string) bool { _, ok := m.agents[name]; return ok }

// Startable lists, sorted, the agents actor may start (as Start would
// allow them): what /spawn agent and /focus acp: offer to complete.
func (m *Manager) Startable(ctx context.Context, actor authz.Actor) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(m.agents)) {
		ac := m.agents[name]
		if m.d.Authority.MayUseAgent(ctx, actor, ac.Users, ac.Roles, "start the ACP agent "+ac.Name) == nil {
			out = append(out, name)
		}
	}
	return out
}

// Run serves until ctx ends, then stops every agent process (bounded).
func (m *Manager) Run(ctx context.Context) error {
	m.wg.Add(1)
	go func() { defer m.wg.Done(); m.reportInterrupted(m.ctx) }()
	<-ctx.Done()
	m.stopAll()
	m.mu.Lock()
	ss := make([]*session, 0, len(m.sessions))
	for _, s := range m.sessions {
		ss = append(ss, s)
	}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range ss {
		wg.Add(1)
		go func() { defer wg.Done(); s.shutdown() }()
	}
	wg.Wait()
	m.wg.Wait()
	return nil
}

func (m *Manager) runCtx() context.Context { return m.ctx }

// StartRequest is /spawn agent:<name> task, or /focus acp:<name>.
type StartRequest struct {
	Agent  string
	Task   string
	Where  binding.ConversationRef // where the command ran
	UserID string
}

// StartResult names the bound thread and session.
type StartResult struct {
	Thread     binding.ConversationRef
	SessionKey string
	Created    bool // a new thread was created
}

// Start binds a thread (the one the command ran in, or a new one under
// the channel) to a new ACP session of the agent and sends the task, if
// any, as the first prompt.
func (m *Manager) Start(ctx context.Context, req StartRequest) (StartResult, error) {
	ac, ok := m.agents[req.Agent]
	if !ok {
		return StartResult{}, fmt.Errorf("start %q: %w", req.Agent, ErrUnknownAgent)
	}
	actor := authz.Actor{UserID: req.UserID, Where: req.Where}
	if err := m.d.Authority.MayUseAgent(ctx, actor, ac.Users, ac.Roles, "start the ACP agent "+ac.Name); err != nil {
		return StartResult{}, err
	}
	if ac.MaxSessions > 0 && m.running(ac.Name) >= ac.MaxSessions {
		return StartResult{}, fmt.Errorf("start %s: %d running: %w", ac.Name, ac.MaxSessions, ErrTooMany)
	}
	thread, created := req.Where, false
	if req.Where.ParentConversationID == "" {
		name := "🤖 " + ac.Name
		if req.Task != "" {
			name += ": " + req.Task
		}
		th, err := m.d.Threads.CreateThread(ctx, req.Where, truncate(name, 100))
		if err != nil {
			return StartResult{}, fmt.Errorf("start %s: %w", ac.Name, err)
		}
		thread, created = th, true
	}
	key := SessionKey(ac.Name, thread.ConversationID)
	dir, err := sessionDir(ac, thread.ConversationID)
	if err != nil {
		return StartResult{}, fmt.Errorf("start %s: %w", ac.Name, err)
	}
	if _, err := NewWorkspace(dir); err != nil {
		return StartResult{}, fmt.Errorf("start %s: %w", ac.Name, err)
	}
	rec := sessionRecord{Key: key, Agent: ac.Name, Conversation: thread, BoundBy: req.UserID, Dir: filepath.Base(dir), CreatedAt: m.d.Clock.Now()}
	if err := m.saveRecord(ac, rec); err != nil {
		return StartResult{}, fmt.Errorf("start %s: %w", ac.Name, err)
	}
	if _, err := m.d.Bindings.Bind(ctx, binding.BindInput{TargetSessionKey: key, TargetKind: KindACP, Conversation: thread,
		AgentID: ac.Name, Label: ac.Name, BoundBy: req.UserID, Metadata: map[string]string{"acpAgent": ac.Name}}); err != nil {
		return StartResult{}, fmt.Errorf("start %s: bind: %w", ac.Name, err)
	}
	s := m.session(ac, rec)
	intro := fmt.Sprintf("🤖 **%s** (an external coding agent) is bound to this thread. Messages here go to it; it works in a workspace of its own and asks before it acts.", ac.Name)
	if req.Task != "" {
		intro += "\nTask: " + req.Task
	}
	if err := m.d.Notices.Notify(ctx, thread, "acp-intro:"+key, intro, transcript.SourceIntro, ac.Name); err != nil {
		m.log.Warn().Err(err).Str("session", key).Msg("acp intro not posted")
	}
	s.enqueue(prompt{text: req.Task, user: req.UserID, warm: req.Task == ""})
	return StartResult{Thread: thread, SessionKey: key, Created: created}, nil
}

// OnBindingEnded stops the agent process of an ACP session whose binding
// ended (unfocus, thread deleted, expiry): its running turn is cancelled,
// the session is dropped. Its record stays; a new binding starts afresh.
//
// It returns once the cancelled turn's messages are finished (bounded by
// endWait): the turn is the owner of its live messages until then, and
// what the binding's end posts next in the thread (the farewell) must come
// after them, on the screen and in the transcript. Run it before the
// farewell's callback.
func (m *Manager) OnBindingEnded(rec binding.Record) {
	if rec.TargetKind != KindACP {
		return
	}
	m.mu.Lock()
	s := m.sessions[rec.TargetSessionKey]
	delete(m.sessions, rec.TargetSessionKey)
	m.mu.Unlock()
	if s == nil {
		return
	}
	select {
	case <-s.shutdown():
	case <-m.opt.After(endWait):
		m.log.Warn().Str("session", rec.TargetSessionKey).Dur("waited", endWait).
			Msg("acp: the ended binding's turn did not finish in time; the farewell goes ahead")
	}
}

// endWait bounds how long an ended binding waits for its turn's messages.
const endWait = 30 * time.Second

// Message is a user message in a bound thread.
type Message struct {
	Conversation binding.ConversationRef
	MessageID    string
	AuthorID     string
	AuthorName   string
	Text         string
}

// HandleMessage records a message of a thread bound to an ACP session and
// queues it as a prompt.
func (m *Manager) HandleMessage(ctx context.Context, rec binding.Record, msg Message) error {
	s, err := m.sessionFor(rec)
	if err != nil {
		return err
	}
	// Prompting drives the agent: the binder, and whoever may start it.
	if msg.AuthorID != s.rec.BoundBy {
		actor := authz.Actor{UserID: msg.AuthorID, Where: msg.Conversation}
		if err := m.d.Authority.MayUseAgent(ctx, actor, s.ac.Users, s.ac.Roles, "talk to "+s.ac.Name); err != nil {
			if s.noteRefused(msg.AuthorID) {
				text := fmt.Sprintf("ℹ️ <@%s>: only <@%s>, operators and the users %s lists can talk to **%s** here; your messages are not sent to it.",
					msg.AuthorID, s.rec.BoundBy, "acp.agents."+s.ac.Name, s.ac.Name)
				// Posted on its own: a running turn holds the thread
				// (Outbound.Hold), and the caller's event lane must not
				// wait for it (the notice follows the turn's messages).
				m.wg.Add(1)
				go func() {
					defer m.wg.Done()
					if err := m.d.Notices.Notify(context.WithoutCancel(ctx), msg.Conversation, "acp-refused:"+msg.MessageID, text, transcript.SourceNotice, s.ac.Name); err != nil {
						m.log.Warn().Err(err).Str("session", s.rec.Key).Msg("acp refusal notice not posted")
					}
				}()
			}
			return nil
		}
	}
	if _, err := m.d.Transcripts.Append(ctx, s.rec.Key, transcript.Entry{Role: transcript.RoleUser, Author: msg.AuthorName, Text: msg.Text,
		MessageIDs: []string{msg.MessageID}, Source: transcript.SourceUser, DeliveryID: "in:" + msg.MessageID}); err != nil {
		return fmt.Errorf("acp message %s: %w", msg.MessageID, err)
	}
	s.enqueue(prompt{text: msg.Text, user: msg.AuthorID, messageID: msg.MessageID})
	return nil
}

// Stop cancels the running turn of the conversation's ACP session
// (session/cancel). The binder or an operator.
func (m *Manager) Stop(ctx context.Context, rec binding.Record, userID string) (string, error) {
	s, err := m.sessionFor(rec)
	if err != nil {
		return "", err
	}
	actor := authz.Actor{UserID: userID, Where: rec.Conversation}
	if userID != s.rec.BoundBy && !m.d.Authority.Operator(ctx, actor, rec.Conversation) {
		return "", &authz.Refusal{Msg: fmt.Sprintf("only <@%s>, who started this agent, or an operator can stop it", s.rec.BoundBy)}
	}
	if !s.cancel() {
		return "ℹ️ The agent is not working on anything.", nil
	}
	return "⏹️ Asked the agent to stop its turn.", nil
}

// Choose answers a permission button. refusal is shown to the clicker
// only; "" means the choice was taken (the message is edited to show it).
func (m *Manager) Choose(ctx context.Context, customID, userID string, where binding.ConversationRef) (refusal string) {
	if id, ok := strings.CutPrefix(customID, killPrefix); ok {
		return m.kill(ctx, id, userID, where)
	}
	id, idx, ok := delivery.ParsePermissionButton(customID)
	if !ok {
		return "This button is not mine to answer."
	}
	m.mu.Lock()
	p := m.perms[id]
	m.mu.Unlock()
	if p == nil {
		return "This request is no longer waiting for an answer."
	}
	// An answer acts on the host (a file write, a command): the binder, or
	// whoever may use the agent (configured operator users, its own lists).
	if userID != p.binder && m.d.Authority.MayUseAgent(ctx, authz.Actor{UserID: userID, Where: where}, p.users, p.roles, "answer it") != nil {
		return fmt.Sprintf("Only <@%s>, who started this agent, the bot's configured operators or the users its configuration lists can answer it.", p.binder)
	}
	if idx < 0 || idx >= len(p.options) {
		return "This button is not one of the request's options."
	}
	m.mu.Lock()
	if m.perms[id] != p {
		m.mu.Unlock()
		return "This request was answered already."
	}
	delete(m.perms, id)
	m.mu.Unlock()
	p.answer <- choice{index: idx, by: userID}
	return ""
}

func (m *Manager) running(agent string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, s := range m.sessions {
		if s.ac.Name == agent && s.alive() {
			n++
		}
	}
	return n
}

// session returns the live session for rec, creating it.
func (m *Manager) session(ac AgentConfig, rec sessionRecord) *session {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.sessions[rec.Key]; s != nil {
		return s
	}
	s := newSession(m, ac, rec)
	m.sessions[rec.Key] = s
	return s
}

// sessionFor finds the session a binding targets, loading its record
// after a restart.
func (m *Manager) sessionFor(b binding.Record) (*session, error) {
	if b.TargetKind != KindACP {
		return nil, ErrNotACP
	}
	m.mu.Lock()
	s := m.sessions[b.TargetSessionKey]
	m.mu.Unlock()
	if s != nil {
		return s, nil
	}
	ac, ok := m.agents[b.AgentID]
	if !ok {
		return nil, fmt.Errorf("session %s: agent %q: %w", b.TargetSessionKey, b.AgentID, ErrUnknownAgent)
	}
	rec, err := m.loadRecord(ac, b.Conversation.ConversationID)
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", b.TargetSessionKey, err)
	}
	return m.session(ac, rec), nil
}

// sessionRecord is what survives a restart: which agent session the
// thread holds and who bound it. It is kept beside the workspaces, out of
// every session's own directory (the agent's file access cannot reach it).
type sessionRecord struct {
	Key          string                  `json:"key"`
	Agent        string                  `json:"agent"`
	Conversation binding.ConversationRef `json:"conversation"`
	BoundBy      string                  `json:"boundBy"`
	Dir          string                  `json:"dir"` // under the agent's workspace root
	ACPSessionID string                  `json:"acpSessionId,omitempty"`
	// TurnInFlight is the turn running when the record was saved: set
	// while a turn runs, so a restart finds one the bot's death cut off.
	TurnInFlight string    `json:"turnInFlight,omitempty"`
	CreatedAt    time.Time `json:"createdAt"`
}

func (m *Manager) saveRecord(ac AgentConfig, rec sessionRecord) error {
	p, err := recordPath(ac, rec.Conversation.ConversationID)
	if err != nil {
		return fmt.Errorf("save session record: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("save session record: %w", err)
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("save session record: %w", err)
	}
	tmp := p + "." + newID() + ".tmp" // writers of one record do not share a temp file
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("save session record: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("save session record: %w", err)
	}
	return nil
}

func (m *Manager) loadRecord(ac AgentConfig, thread string) (sessionRecord, error) {
	p, err := recordPath(ac, thread)
	if err != nil {
		return sessionRecord{}, fmt.Errorf("load session record: %w", err)
	}
	return loadRecordFile(p)
}

func loadRecordFile(p string) (sessionRecord, error) {
	var rec sessionRecord
	b, err := os.ReadFile(p)
	if err != nil {
		return rec, fmt.Errorf("load session record: %w", err)
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, fmt.Errorf("load session record: %w", err)
	}
	return rec, nil
}

// reportInterrupted tells each thread whose agent turn was running when
// the bot died that the turn was cut off (invariant 16: every accepted
// turn ends visibly).
func (m *Manager) reportInterrupted(ctx context.Context) {
	if m.opt.Ready != nil {
		select {
		case <-m.opt.Ready:
		case <-ctx.Done():
			return
		}
	}
	for _, ac := range m.opt.Agents {
		paths, _ := filepath.Glob(filepath.Join(ac.Workspace, ".agentbot-sessions", "*.json"))
		for _, p := range paths {
			rec, err := loadRecordFile(p)
			if err != nil || rec.TurnInFlight == "" {
				continue
			}
			text := fmt.Sprintf("⚠️ The bot restarted while **%s** was working on a turn here; that turn was interrupted. Send your message again to continue.", ac.Name)
			if ac.Terminal {
				text = fmt.Sprintf("⚠️ The bot restarted while **%s** was working on a turn here; that turn was interrupted: any command it was running was cut off (killed), and a command waiting for approval expired without running. Send your message again to continue.", ac.Name)
			}
			if err := m.d.Notices.Notify(ctx, rec.Conversation, "acp-interrupted:"+rec.Key+":"+rec.TurnInFlight, text, transcript.SourceNotice, ac.Name); err != nil {
				m.log.Warn().Err(err).Str("session", rec.Key).Msg("acp interrupted-turn notice not posted")
				continue
			}
			// Cleared unless a new turn has started meanwhile.
			m.mu.Lock()
			s := m.sessions[rec.Key]
			m.mu.Unlock()
			if s != nil {
				s.clearInFlight(rec.TurnInFlight)
				continue
			}
			rec.TurnInFlight = ""
			if err := m.saveRecord(ac, rec); err != nil {
				m.log.Warn().Err(err).Str("session", rec.Key).Msg("acp session record not saved")
			}
		}
	}
}

func newID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// pendingPerm is a permission request waiting for a click.
type pendingPerm struct {
	binder string
	// users, roles: the agent's own lists (who may answer besides the binder).
	users, roles []string
	options      []sdk.PermissionOption
	answer       chan choice
}

type choice struct {
	index int
	by    string
}
