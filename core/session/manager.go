package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/lane"
	"github.com/agentbot/agentbot/core/sessionkey"
	"github.com/agentbot/agentbot/internal/work"
)

// Options are the manager's settings.
type Options struct {
	Channel   string // platform of conversations, "discord"
	AccountID string
	Agents    []Agent // the first is the default agent
	// ThreadBindings mirrors discord.threadBindings.
	ThreadBindings         bool
	SpawnSubagentSessions  bool
	IdleTimeout, MaxAge    time.Duration
	MaxConcurrentSubagents int
	SubagentTimeout        time.Duration
	// DrainTimeout bounds how long Run waits for in-flight turns on stop.
	DrainTimeout time.Duration
	// ModelText, if set, rewrites a user entry's displayed text for the
	// model (the platform's mention markup into names). Stored entries keep
	// the text exactly as displayed.
	ModelText func(string) string
	// OnTurn, if set, observes each turn's latency from start to confirmed reply.
	OnTurn func(time.Duration)
	// TypingEvery renews the typing indicator (default DefaultTypingEvery).
	TypingEvery time.Duration
	// LiveAfter paces a streamed reply's edits (nil: time.After; tests
	// fire it by hand).
	LiveAfter func(time.Duration) <-chan time.Time
	// AttachmentCacheBytes caps the fetched attachments kept in memory
	// (default DefaultAttachmentCacheBytes); RequestAttachmentBytes caps
	// the attachment bytes of one model request (default
	// DefaultRequestAttachmentBytes).
	AttachmentCacheBytes, RequestAttachmentBytes int64
}

// Deps are the manager's collaborators.
type Deps struct {
	Outbound    Deliverer
	Router      Router
	Bindings    Bindings
	Transcripts Transcripts
	Store       Store
	Threads     Threads // nil: no thread creation
	Jobs        Jobs    // nil: job tools are not offered
	// External takes the messages of conversations bound to an external
	// agent's session (nil: none is configured; such a binding routes to
	// a session of this manager).
	External External
	// Toolbox offers the agents' MCP tools, to turns and subagents (nil: none).
	Toolbox Toolbox
	// Notes gives each turn the notes in its scope (core/notes; nil: none).
	Notes Notes
	// Authority decides where send_message may post (nil: nowhere but the
	// turn's own conversation).
	Authority Authority
	// Turns, if set, serialises a session's work across processes sharing
	// the store (nil: this process's queue is the only serialisation).
	Turns TurnLocker
	// Fetcher fetches user attachments (nil: they are named, not read).
	Fetcher Fetcher
	// Typist shows the typing indicator while work runs (nil: none).
	Typist Typist
	// Budget is the users' turn budget (core/authz.Limiter): a re-run of
	// a turn after an edit of its message takes a turn of it (nil: re-runs
	// are only capped, MaxEditReruns).
	Budget Budget
	// Usage records every model call's tokens and checks access.budget
	// before a turn, job run or subagent (nil: neither).
	Usage Meter
	// Places tells a conversation's server or room for usage records and
	// server budgets (nil: unknown).
	Places Places
	// After paces typing renewals (nil: time.After).
	After After
	Clock clock.Clock
	Log   zerolog.Logger
}

// TurnLocker holds a lock per session key across processes (PostgreSQL
// advisory locks): Lock blocks until the caller holds key's lock or ctx
// ends; unlock releases it. Every queued task of a session (a turn, a job
// turn, a subagent run) runs under it.
type TurnLocker interface {
	Lock(ctx context.Context, key string) (unlock func(), err error)
}

// Manager runs sessions: one turn at a time per session, subagent spawns
// and their completions. It never writes a transcript entry other than a
// turn's own user and reply entries; everything else goes through Outbound.
type Manager struct {
	opt    Options
	d      Deps
	agents map[string]Agent
	attach *attachCache // fetched attachments (attachcache.go)

	baseMu sync.Mutex
	base   context.Context // cancelled when Run stops
	work   work.Group      // queued session tasks and farewells; Run waits for them

	tasks *lane.Lanes // one task at a time per session

	imu      sync.RWMutex
	sessions map[string]Info
	queued   map[string]bool // user message ids whose turn this process queued
	// unfinished are the sessions Load found with owed turns or running
	// subagents: what Resume restarts (work of this process is not in it).
	unfinished []string

	tmu    sync.Mutex
	typing map[string]*typingLoop // by conversation id

	rmu  sync.Mutex
	runs map[string]*running // work /stop can end, by session key
	trig map[string]*trigger // turns of user messages, by message id (changes.go)

	// takes orders the taking of user messages per conversation (see
	// HandleMessage); guarded by takeMu.
	takeMu sync.Mutex
	takes  map[string]*takeLock
}

// takeLock is one conversation's lock on taking user messages: a channel,
// so a waiter is blocked on a channel operation (testing/synctest sees it).
type takeLock struct {
	held  chan struct{}
	users int
}

// lockTake holds the conversation's take lock until the returned unlock.
func (m *Manager) lockTake(conv string) (unlock func()) {
	m.takeMu.Lock()
	l := m.takes[conv]
	if l == nil {
		l = &takeLock{held: make(chan struct{}, 1)}
		m.takes[conv] = l
	}
	l.users++
	m.takeMu.Unlock()
	l.held <- struct{}{}
	return func() {
		<-l.held
		m.takeMu.Lock()
		if l.users--; l.users == 0 {
			delete(m.takes, conv)
		}
		m.takeMu.Unlock()
	}
}

// New returns a manager. It does no I/O; call Load, then Run.
func New(opt Options, d Deps) *Manager {
	if d.Clock == nil {
		d.Clock = clock.Real{}
	}
	if opt.MaxConcurrentSubagents <= 0 {
		opt.MaxConcurrentSubagents = 4
	}
	if opt.SubagentTimeout <= 0 {
		opt.SubagentTimeout = 10 * time.Minute
	}
	if opt.DrainTimeout <= 0 {
		opt.DrainTimeout = 10 * time.Second
	}
	if d.After == nil {
		d.After = time.After
	}
	if opt.TypingEvery <= 0 {
		opt.TypingEvery = DefaultTypingEvery
	}
	if opt.Channel == "" {
		opt.Channel = "discord"
	}
	if opt.AttachmentCacheBytes <= 0 {
		opt.AttachmentCacheBytes = DefaultAttachmentCacheBytes
	}
	if opt.RequestAttachmentBytes <= 0 {
		opt.RequestAttachmentBytes = DefaultRequestAttachmentBytes
	}
	m := &Manager{opt: opt, d: d, agents: map[string]Agent{}, sessions: map[string]Info{}, queued: map[string]bool{}, typing: map[string]*typingLoop{}, runs: map[string]*running{}, trig: map[string]*trigger{}, takes: map[string]*takeLock{}, base: context.Background()}
	m.tasks = lane.New(lane.Options{}, lane.Deps{Log: d.Log})
	m.attach = newAttachCache(opt.AttachmentCacheBytes)
	for _, a := range opt.Agents {
		m.agents[a.ID] = a
	}
	return m
}

// DefaultAgent is the first configured agent.
func (m *Manager) DefaultAgent() Agent { return m.opt.Agents[0] }

// Agent returns a configured agent.
func (m *Manager) Agent(id string) (Agent, bool) {
	a, ok := m.agents[id]
	return a, ok
}

// Load reads the session registry (Resume restarts unfinished work).
func (m *Manager) Load(ctx context.Context) error {
	infos, err := m.d.Store.SessionInfos(ctx)
	if err != nil {
		return fmt.Errorf("load sessions: %w", err)
	}
	m.imu.Lock()
	defer m.imu.Unlock()
	for _, in := range infos {
		m.sessions[in.Key] = in
		if len(in.Pending) > 0 || (in.Kind == KindSubagent && (in.Status == StatusRunning || in.AnnouncePending)) {
			m.unfinished = append(m.unfinished, in.Key)
		}
	}
	return nil
}

// Resume restarts what the previous process left unfinished (as found by
// Load): the turns of
// user messages that got no answer (in arrival order per session) and the
// subagent runs that were still running. Call it once the platform is
// connected and Outbound.Recover has finished earlier sends; a turn whose
// reply was already confirmed is not run again.
func (m *Manager) Resume(ctx context.Context) (turns, runs int) {
	m.imu.Lock()
	keys := m.unfinished
	m.unfinished = nil
	m.imu.Unlock()
	for _, key := range keys {
		in, ok := m.Info(key)
		if !ok {
			continue
		}
		for _, p := range in.Pending {
			if p.Rounds > 0 {
				// A streamed turn a crash interrupted between rounds: its
				// first messages are displayed, its last is not.
				m.endInterrupted(ctx, in.Key, p)
				continue
			}
			if p.DeliveryID != "" { // a re-answer of an edited message
				m.dropPending(ctx, in.Key, func(q PendingTurn) bool { return q.deliveryID() == p.deliveryID() })
				if done, err := m.answered(ctx, p.DeliveryID); err == nil && done {
					continue
				}
				editKey := strings.TrimPrefix(p.DeliveryID, "turn:"+p.Message.MessageID+":edit:")
				if ok, err := m.Reanswer(ctx, p.Message, editKey); err != nil {
					m.d.Log.Error().Err(err).Str("session", in.Key).Msg("resume re-answer")
				} else if ok {
					turns++
				}
				continue
			}
			if m.seen(ctx, p.Message.MessageID) {
				m.imu.RLock()
				queued := m.queued[p.Message.MessageID]
				m.imu.RUnlock()
				if !queued { // answered before the crash
					m.removePending(ctx, in.Key, p.deliveryID())
				}
				continue
			}
			// The one dispatch step decides: the session that took the
			// message resumes its turn; a message never recorded goes
			// where the conversation routes now (and the owed turn here
			// is dropped); one taken elsewhere is not taken again.
			if err := m.HandleMessage(ctx, p.Message); err != nil {
				m.d.Log.Error().Err(err).Str("session", in.Key).Msg("resume turn")
				continue
			}
			turns++
		}
		if in.Kind == KindSubagent && in.Status == StatusRunning {
			if done, err := m.d.Outbound.Delivered(ctx, announceID(in.Key)); err == nil && done {
				continue // announced by the process that ran it
			}
			key := in.Key
			if err := m.enqueue(key, func(ctx context.Context) { m.runSubagent(ctx, key) }); err != nil {
				continue // still running in the store: the next start resumes it
			}
			runs++
		} else if in.Kind == KindSubagent && in.AnnouncePending {
			// Finished, but the completion's outcome was not recorded:
			// announce it from the saved result (idempotent by its id).
			key := in.Key
			m.enqueue(key, func(ctx context.Context) { m.announceSaved(ctx, key) })
			runs++
		}
	}
	return turns, runs
}

// newerID compares snowflake-like decimal ids (longer is newer).
func newerID(a, b string) bool {
	if len(a) != len(b) {
		return len(a) > len(b)
	}
	return a > b
}

// Watermarks returns, per conversation id, the message after which a
// restarted bot should read what it missed: the newest user message any
// session took, or just before the oldest one whose turn is still owed, so
// owed and missed messages are taken again in display order.
func (m *Manager) Watermarks() map[string]string {
	m.imu.RLock()
	defer m.imu.RUnlock()
	out := map[string]string{}
	for _, in := range m.sessions {
		for conv, id := range in.LastInbound {
			if newerID(id, out[conv]) {
				out[conv] = id
			}
		}
	}
	for _, in := range m.sessions {
		for _, p := range in.Pending {
			conv, id := p.Message.Conversation.ConversationID, p.Message.MessageID
			if before := prevID(id); before != "" && newerID(out[conv], before) {
				out[conv] = before
			}
		}
	}
	return out
}

// prevID is the decimal id just before id ("" if it is not a number).
func prevID(id string) string {
	n, err := strconv.ParseUint(id, 10, 64)
	if err != nil || n == 0 {
		return ""
	}
	return strconv.FormatUint(n-1, 10)
}

// seen reports whether this process already took a user message (its turn
// is queued) or its reply was confirmed. A turn owed by a previous process
// is not seen: taking it again resumes it.
func (m *Manager) seen(ctx context.Context, messageID string) bool {
	m.imu.RLock()
	queued := m.queued[messageID]
	m.imu.RUnlock()
	if queued {
		return true
	}
	done, err := m.answered(ctx, "turn:"+messageID)
	return err == nil && done
}

// addPending records a turn as owed (persisted first, so a crash at any
// later point resumes it).
func (m *Manager) addPending(ctx context.Context, key string, p PendingTurn) {
	msg := p.Message
	m.imu.Lock()
	in, ok := m.sessions[key]
	if !ok {
		m.imu.Unlock()
		return
	}
	for _, q := range in.Pending {
		if q.deliveryID() == p.deliveryID() {
			m.imu.Unlock()
			return
		}
	}
	in.Pending = append(slices.Clone(in.Pending), p)
	if newerID(msg.MessageID, in.LastInbound[msg.Conversation.ConversationID]) {
		in.LastInbound = maps.Clone(in.LastInbound)
		if in.LastInbound == nil {
			in.LastInbound = map[string]string{}
		}
		in.LastInbound[msg.Conversation.ConversationID] = msg.MessageID
	}
	m.sessions[key] = in
	m.imu.Unlock()
	if err := m.d.Store.PutSessionInfo(ctx, in); err != nil {
		m.d.Log.Error().Err(err).Str("session", key).Msg("persist pending turn")
	}
}

// removePending forgets a finished turn (by its delivery id).
func (m *Manager) removePending(ctx context.Context, key, deliveryID string) {
	m.dropPending(ctx, key, func(p PendingTurn) bool { return p.deliveryID() == deliveryID })
}

// dropPending forgets the owed turns of key that drop selects.
func (m *Manager) dropPending(ctx context.Context, key string, drop func(PendingTurn) bool) {
	m.imu.Lock()
	in, ok := m.sessions[key]
	if !ok || !slices.ContainsFunc(in.Pending, drop) {
		m.imu.Unlock()
		return
	}
	in.Pending = slices.DeleteFunc(slices.Clone(in.Pending), drop)
	m.sessions[key] = in
	m.imu.Unlock()
	if err := m.d.Store.PutSessionInfo(ctx, in); err != nil {
		m.d.Log.Error().Err(err).Str("session", key).Msg("persist finished turn")
	}
}

// Run keeps the manager's background work alive until ctx ends, then waits
// (at most DrainTimeout) for in-flight turns and subagent runs.
func (m *Manager) Run(ctx context.Context) error {
	m.baseMu.Lock()
	m.base = ctx
	m.baseMu.Unlock()
	<-ctx.Done()
	done := make(chan struct{})
	go func() { m.work.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-time.After(m.opt.DrainTimeout):
		return fmt.Errorf("sessions: %w: in-flight work did not finish in %s", context.DeadlineExceeded, m.opt.DrainTimeout)
	}
}

func (m *Manager) baseCtx() context.Context {
	m.baseMu.Lock()
	defer m.baseMu.Unlock()
	return m.base
}

// enqueue runs task after every earlier task of the same session. Once
// Run has drained for a stop it starts nothing and returns ErrStopping.
func (m *Manager) enqueue(key string, task func(context.Context)) error {
	if !m.work.Add() {
		return ErrStopping
	}
	if err := m.tasks.Push(key, "session task", func(context.Context) { m.runSafely(key, task) }); err != nil {
		m.work.Done()
		return fmt.Errorf("queue session task: %w", err)
	}
	return nil
}

// runSafely runs one queued task of session key under the session's
// store lock, if any, and ends its work-group count.
func (m *Manager) runSafely(key string, task func(context.Context)) {
	defer m.work.Done()
	defer func() {
		if r := recover(); r != nil {
			m.d.Log.Error().Str("session", key).Interface("panic", r).Msg("session task panicked")
		}
	}()
	ctx := context.WithoutCancel(m.baseCtx())
	if m.d.Turns != nil {
		unlock, err := m.d.Turns.Lock(ctx, key)
		if err != nil {
			// Availability over strictness: the store itself still keeps
			// the transcript consistent (append is atomic per session).
			m.d.Log.Error().Err(err).Str("session", key).Msg("session lock unavailable; running the task without it")
		} else {
			defer unlock()
		}
	}
	task(ctx)
}

// Info returns a session's registry record.
func (m *Manager) Info(key string) (Info, bool) {
	m.imu.RLock()
	defer m.imu.RUnlock()
	in, ok := m.sessions[key]
	return in, ok
}

func (m *Manager) putInfo(ctx context.Context, in Info) {
	m.imu.Lock()
	m.sessions[in.Key] = in
	m.imu.Unlock()
	if err := m.d.Store.PutSessionInfo(ctx, in); err != nil {
		m.d.Log.Error().Err(err).Str("session", in.Key).Msg("persist session")
	}
}

// updateInfo changes the current registry record of key with fn and
// persists it, so a change of some fields never overwrites others made
// meanwhile (pending turns, watermarks). It returns the record written.
func (m *Manager) updateInfo(ctx context.Context, key string, fn func(*Info)) (Info, bool) {
	m.imu.Lock()
	in, ok := m.sessions[key]
	if !ok {
		m.imu.Unlock()
		return Info{}, false
	}
	fn(&in)
	m.sessions[key] = in
	m.imu.Unlock()
	if err := m.d.Store.PutSessionInfo(ctx, in); err != nil {
		m.d.Log.Error().Err(err).Str("session", key).Msg("persist session")
	}
	return in, true
}

// Sessions lists registry records matching keep.
func (m *Manager) Sessions(keep func(Info) bool) []Info {
	m.imu.RLock()
	defer m.imu.RUnlock()
	var out []Info
	for _, in := range m.sessions {
		if keep == nil || keep(in) {
			out = append(out, in)
		}
	}
	sortInfos(out)
	return out
}

func newID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// agentFor returns the agent that owns a session key (default agent when the
// key names an unknown one).
func (m *Manager) agentFor(key string) Agent {
	if a, ok := m.agents[sessionkey.Agent(key)]; ok {
		return a
	}
	return m.DefaultAgent()
}

// ConversationRef builds a ref on this manager's platform and account.
func (m *Manager) ConversationRef(conversationID, parentID string) binding.ConversationRef {
	return binding.ConversationRef{Channel: m.opt.Channel, AccountID: m.opt.AccountID, ConversationID: conversationID, ParentConversationID: parentID}.Normalize()
}

// ensureMain registers a conversation's own session on first use.
func (m *Manager) ensureMain(ctx context.Context, key string, conv binding.ConversationRef) {
	if _, ok := m.Info(key); ok || sessionkey.KindOf(key) != KindMain {
		return
	}
	m.putInfo(ctx, Info{Key: key, AgentID: sessionkey.Agent(key), Kind: KindMain, Requester: conv, Status: StatusIdle, CreatedAt: m.d.Clock.Now()})
}

// Reset starts a new transcript generation for the session the
// conversation routes to and returns its key.
func (m *Manager) Reset(ctx context.Context, conv binding.ConversationRef) (string, error) {
	key, _, _ := m.d.Outbound.SessionFor(conv)
	var gen int
	err := m.d.Outbound.WithConversation(conv, func() error {
		var err error
		gen, err = m.d.Transcripts.Reset(ctx, key)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("reset %s: %w", key, err)
	}
	if in, ok := m.Info(key); ok {
		in.Generation = gen
		m.putInfo(ctx, in)
	}
	return key, nil
}

// isGone reports whether a failed send means the conversation cannot take
// messages any more (fail-closed cases of invariant 6).
func isGone(err error) bool {
	return errors.Is(err, delivery.ErrDestinationGone) || errors.Is(err, delivery.ErrForbidden)
}
