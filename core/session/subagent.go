package session

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/sessionkey"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/core/usertext"
	"github.com/agentbot/agentbot/model"
)

// SpawnRequest starts a subagent.
type SpawnRequest struct {
	Task        string
	Label       string
	AgentID     string // "" = the requester session's agent
	Thread      *bool  // nil = Options.SpawnSubagentSessions
	Requester   binding.ConversationRef
	RequestedBy string // user id; "" = system
	ParentKey   string
}

// SpawnResult says what was started.
type SpawnResult struct {
	Key    string
	Label  string
	Thread *binding.ConversationRef
	// NoThreadReason explains why a requested thread was not created.
	NoThreadReason string
}

// Summary is the user-facing line for /spawn and the tool result.
func (r SpawnResult) Summary() string {
	s := fmt.Sprintf("Started subagent **%s** (`%s`)", r.Label, r.Key)
	if r.Thread != nil {
		s += fmt.Sprintf(" in <#%s>", r.Thread.ConversationID)
	} else if r.NoThreadReason != "" {
		s += " without a thread (" + r.NoThreadReason + ")"
	}
	return s + "."
}

// Spawn registers a subagent session, optionally creates and binds its
// thread and posts the persona's intro there, and starts the task. The
// completion is delivered by the router's decision (see announce).
func (m *Manager) Spawn(ctx context.Context, req SpawnRequest) (SpawnResult, error) {
	req.Task = strings.TrimSpace(req.Task)
	if req.Task == "" {
		return SpawnResult{}, ErrEmptyTask
	}
	if req.AgentID == "" {
		req.AgentID = sessionkey.Agent(req.ParentKey)
	}
	agent, ok := m.agents[req.AgentID]
	if !ok {
		if req.ParentKey != "" && sessionkey.Agent(req.ParentKey) == req.AgentID {
			agent = m.DefaultAgent()
		} else if req.AgentID != "" {
			return SpawnResult{}, fmt.Errorf("spawn: agent %q: %w", req.AgentID, ErrUnknownAgent)
		} else {
			agent = m.DefaultAgent()
		}
	}
	id := newID()
	key := sessionkey.Subagent(agent.ID, id)
	label := strings.TrimSpace(req.Label)
	if label == "" {
		label = "task-" + id[:6]
	}
	requester := req.Requester.Normalize()
	parentKey := req.ParentKey
	if parentKey == "" {
		parentKey, _, _ = m.d.Outbound.SessionFor(requester)
	}
	info := Info{Key: key, AgentID: agent.ID, Kind: KindSubagent, Parent: parentKey, Requester: requester, Label: label,
		Task: req.Task, Status: StatusRunning, SpawnedBy: req.RequestedBy, CreatedAt: m.d.Clock.Now()}
	res := SpawnResult{Key: key, Label: label}
	if err := m.reserve(info); err != nil {
		return SpawnResult{}, err
	}

	wantThread := m.opt.SpawnSubagentSessions
	if req.Thread != nil {
		wantThread = *req.Thread
	}
	if wantThread {
		thread, b, reason, err := m.bindThread(ctx, info, agent, req.RequestedBy)
		if err != nil {
			m.imu.Lock()
			delete(m.sessions, key) // release the reserved slot
			m.imu.Unlock()
			return SpawnResult{}, err
		}
		if thread != nil {
			res.Thread = thread
			info.BindingID, info.Thread = b.ID, thread.ConversationID
		}
		res.NoThreadReason = reason
	}
	m.putInfo(ctx, info)
	if res.Thread != nil {
		m.intro(ctx, info, agent, *res.Thread)
	}
	// Refused only while stopping: it is recorded as running, so the next
	// start runs it.
	_ = m.enqueue(key, func(ctx context.Context) { m.runSubagent(ctx, key) })
	return res, nil
}

// reserve checks the concurrency cap and registers the running subagent
// in memory in one step, so concurrent spawns (each creating a thread
// before it is persisted) cannot exceed the cap.
func (m *Manager) reserve(info Info) error {
	m.imu.Lock()
	defer m.imu.Unlock()
	running := 0
	for _, in := range m.sessions {
		if in.Kind == KindSubagent && in.Status == StatusRunning {
			running++
		}
	}
	if running >= m.opt.MaxConcurrentSubagents {
		return fmt.Errorf("spawn: %d of %d running: %w", running, m.opt.MaxConcurrentSubagents, ErrTooManySubagents)
	}
	m.sessions[info.Key] = info
	return nil
}

// bindThread creates the subagent's thread in the requester's parent
// channel and binds it. A DM or disabled bindings yield no thread, with a reason.
func (m *Manager) bindThread(ctx context.Context, info Info, agent Agent, by string) (*binding.ConversationRef, binding.Record, string, error) {
	switch {
	case !m.opt.ThreadBindings:
		return nil, binding.Record{}, "thread bindings are disabled", nil
	case m.d.Threads == nil:
		return nil, binding.Record{}, "this platform has no threads", nil
	case strings.HasPrefix(info.Requester.ConversationID, sessionkey.DMPrefix):
		return nil, binding.Record{}, "direct messages have no threads", nil
	}
	parent := info.Requester
	if parent.ParentConversationID != "" { // spawned from inside a thread: new thread in the parent
		parent = binding.ConversationRef{Channel: parent.Channel, AccountID: parent.AccountID, ConversationID: parent.ParentConversationID}.Normalize()
	}
	thread, err := m.d.Threads.CreateThread(ctx, parent, truncateRunes("🤖 "+info.Label, 100))
	if err != nil {
		return nil, binding.Record{}, "", fmt.Errorf("spawn %s: create thread: %w", info.Label, err)
	}
	if by == "" {
		by = "system"
	}
	b, err := m.d.Bindings.Bind(ctx, binding.BindInput{TargetSessionKey: info.Key, TargetKind: binding.KindSubagent, Conversation: thread,
		AgentID: agent.ID, Label: info.Label, BoundBy: by, IdleTimeout: m.opt.IdleTimeout, MaxAge: m.opt.MaxAge})
	if err != nil {
		return nil, binding.Record{}, "", fmt.Errorf("spawn %s: bind thread: %w", info.Label, err)
	}
	return &thread, b, "", nil
}

// IntroText is the persona's first message in its thread.
func IntroText(label string, idle, maxAge time.Duration) string {
	var windows []string
	if idle > 0 {
		windows = append(windows, "idle auto-unfocus after "+FormatDuration(idle)+" inactivity")
	}
	if maxAge > 0 {
		windows = append(windows, "max age "+FormatDuration(maxAge))
	}
	s := "⚙️ " + label + " session active"
	if len(windows) > 0 {
		s += " (" + strings.Join(windows, "; ") + ")"
	}
	return s + ". Messages here go directly to this session."
}

// FarewellText is posted by the bot when a binding ends on its own.
func FarewellText(reason string, idle, maxAge time.Duration) string {
	return farewellText(binding.Record{EndedReason: reason, IdleTimeout: idle, MaxAge: maxAge})
}

func farewellText(r binding.Record) string {
	idle, maxAge := r.IdleTimeout, r.MaxAge
	switch r.EndedReason {
	case binding.ReasonMoved:
		if to := r.Metadata[binding.MetaMovedTo]; to != "" {
			return "⚙️ This session moved to <#" + to + ">. Messages here will no longer be routed to it."
		}
		return "⚙️ This session moved to another conversation. Messages here will no longer be routed to it."
	case binding.ReasonIdleExpired:
		return "⚙️ Session ended automatically after " + FormatDuration(idle) + " of inactivity. Messages here will no longer be routed."
	case binding.ReasonMaxAgeExpired:
		return "⚙️ Session ended automatically at max age of " + FormatDuration(maxAge) + ". Messages here will no longer be routed."
	}
	return "⚙️ Session ended. Messages here will no longer be routed."
}

// FormatDuration renders "disabled", "<1m", "Nh" or "Nm".
func FormatDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "disabled"
	case d < time.Minute:
		return "<1m"
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	}
	return fmt.Sprintf("%dm", int(d/time.Minute))
}

func (m *Manager) intro(ctx context.Context, info Info, agent Agent, thread binding.ConversationRef) {
	persona, _ := m.persona(info.Key, true)
	text := IntroText(info.Label, m.opt.IdleTimeout, m.opt.MaxAge) + "\nTask: " + info.Task
	_, err := m.d.Outbound.Deliver(ctx, delivery.Delivery{ID: "intro:" + info.Key, Target: thread, Text: text, Persona: persona, ViaWebhook: true, BindingID: info.BindingID,
		Producer: delivery.Producer{Source: transcript.SourceIntro, AgentID: agent.ID, Meta: map[string]string{"subagent": info.Key, "label": info.Label}}}, nil)
	if err != nil {
		m.d.Log.Warn().Err(err).Str("session", info.Key).Msg("intro not delivered")
	}
}

// runSubagent runs the task with the run timeout and announces the result.
func (m *Manager) runSubagent(ctx context.Context, key string) {
	info, _ := m.Info(key)
	agent := m.agentFor(key)
	rctx, cancel := context.WithTimeout(ctx, m.opt.SubagentTimeout)
	defer cancel()
	history, err := m.d.Transcripts.History(rctx, key, max(agent.MaxHistory, 1))
	var text string
	budgetNotice := ""
	if err == nil {
		if notice, refused := m.budget(rctx, turnInput{key: key, conv: info.Requester, requester: info.SpawnedBy}); refused {
			err, budgetNotice = ErrOverBudget, cmp.Or(notice, "⏳ The usage budget is spent; the subagent did not run.")
		}
	}
	if err == nil {
		stopTyping := m.startTyping(m.answerConversation(info))
		defer stopTyping()
		msgs := append(m.toMessages(rctx, turnInput{key: key}, history), model.Message{Role: model.RoleUser, Text: "Task: " + info.Task})
		sctx, end := m.startRun(rctx, key, info.SpawnedBy)
		// A subagent gets its agent's MCP tools, acting for its spawner, and
		// none of the bot's own (orchestration) tools.
		// The run's usage records are written together when it ends.
		t := turnInput{key: key, conv: info.Requester, requester: info.SpawnedBy, tally: &tally{}}
		req := model.Request{System: m.systemPrompt(agent, key), Messages: msgs}
		if agent.MaxToolSteps > 0 {
			req.Tools = m.toolboxTools(sctx, agent, t)
		}
		text, err = m.toolLoop(sctx, agent, t, req, nil)
		m.flushUsage(sctx, t)
		if stopped(sctx) {
			err = ErrStopped
		}
		end()
		stopTyping()
	}
	status := StatusOK
	switch {
	case errors.Is(err, ErrStopped):
		status, text = StatusStopped, ""
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(rctx.Err(), context.DeadlineExceeded):
		status = StatusTimeout
	case err != nil:
		status = StatusError
	}
	errText := ""
	switch {
	case status == StatusStopped:
		errText = "stopped with /stop"
	case budgetNotice != "":
		errText = budgetNotice
	case err != nil:
		errText, _ = usertext.Message(forPeople(err))
	}
	// The result and the owed announce are one write: a crash after it
	// announces from the saved result, a crash before it runs the task again.
	info, ok := m.updateInfo(ctx, key, func(in *Info) {
		in.Status, in.Result, in.Error, in.EndedAt, in.AnnouncePending = status, text, errText, m.d.Clock.Now(), true
	})
	if !ok {
		return
	}
	m.announce(ctx, info)
}

// answerConversation is where a subagent's result will appear: its bound
// thread while the binding is active, else the conversation that asked.
func (m *Manager) answerConversation(info Info) binding.ConversationRef {
	for _, r := range m.d.Bindings.ListBySession(info.Key) {
		if r.Status == binding.StatusActive {
			return r.Conversation
		}
	}
	return info.Requester
}

// CompletionText is what a subagent's completion displays.
func CompletionText(info Info) string {
	switch info.Status {
	case StatusOK:
		return "✅ " + info.Label + " finished:\n" + info.Result
	case StatusTimeout:
		return "⏱️ " + info.Label + " timed out before finishing its task."
	case StatusStopped:
		return "⏹️ " + info.Label + " was stopped before finishing its task."
	}
	return "❌ " + info.Label + " failed: " + info.Error
}

// announceSaved announces a finished subagent from its saved record.
func (m *Manager) announceSaved(ctx context.Context, key string) {
	info, ok := m.Info(key)
	if !ok || info.Kind != KindSubagent || info.Status == StatusRunning || !info.AnnouncePending {
		return
	}
	m.announce(ctx, info)
}

// RecoverCompletion is Outbound's recovery of an unfinished subagent
// completion (see delivery.OutboundDeps.Recover): it is announced again
// through the live path, so a thread that went away meanwhile ends the
// same way (no post, unbind with a reason, a notice, status undelivered)
// instead of the recorded send being repeated blindly.
func (m *Manager) RecoverCompletion(ctx context.Context, r delivery.Record) (bool, error) {
	key := r.Delivery.Producer.Meta["subagent"]
	info, ok := m.Info(key)
	if !ok || info.Kind != KindSubagent || r.Delivery.ID != announceID(key) {
		return false, nil
	}
	if info.Status == StatusRunning {
		return true, nil // being run again (Resume); its run announces it
	}
	if info.Status == StatusUndeliver && !info.AnnouncePending {
		_, err := m.d.Outbound.Abandon(ctx, r.Delivery.ID, "fail-closed: "+string(StatusUndeliver))
		return true, err
	}
	if !info.AnnouncePending {
		// Recorded before completions carried AnnouncePending: owed all the same.
		info, _ = m.updateInfo(ctx, key, func(in *Info) { in.AnnouncePending = true })
	}
	m.announce(ctx, info)
	return true, nil
}

// announce delivers a subagent's completion where the router says, and
// only there (invariant 6): a session that was ever bound never falls
// back; a bound thread that cannot take it gets nothing, the binding
// ends, and the requester gets a notice without the result. It is
// idempotent (one delivery id), so it may run again after a crash; it
// clears AnnouncePending once the outcome is terminal.
func (m *Manager) announce(ctx context.Context, info Info) {
	text := CompletionText(info)
	requester := info.Requester
	agent := m.agentFor(info.Key)
	meta := map[string]string{"subagent": info.Key, "label": info.Label, "status": string(info.Status)}
	d := delivery.Delivery{ID: announceID(info.Key), Text: text, Target: requester, Producer: delivery.Producer{Source: transcript.SourceAnnounce, AgentID: agent.ID, Meta: meta}}
	log := m.d.Log.With().Str("session", info.Key).Logger()
	if done, err := m.d.Outbound.Delivered(ctx, d.ID); err == nil && done {
		// Displayed before a crash: finish its record (Outbound keeps the
		// recorded destination and text), never route it again.
		if _, err := m.d.Outbound.Deliver(ctx, d, nil); err != nil {
			log.Error().Err(err).Msg("finish displayed completion")
			return
		}
		m.announced(ctx, info.Key)
		return
	}
	if info.Status == StatusUndeliver {
		// Decided before a crash: finish that outcome (its notice), whatever routes now.
		m.undeliverable(ctx, info, "its thread can no longer take messages")
		return
	}
	dec := m.d.Router.ResolveDestination(delivery.RouteRequest{EventKind: delivery.EventTaskCompletion, TargetSessionKey: info.Key, Requester: &requester, FailClosed: true})
	log = log.With().Str("route", string(dec.Mode)).Str("reason", dec.Reason).Logger()
	switch dec.Mode {
	case delivery.ModeBound:
		d.Target, d.BindingID, d.ViaWebhook = dec.Binding.Conversation, dec.Binding.ID, true
		d.Persona, _ = m.persona(info.Key, true)
		_, err := m.d.Outbound.Deliver(ctx, d, nil)
		switch {
		case err == nil:
			log.Info().Msg("completion delivered to its thread")
			m.announced(ctx, info.Key)
		case errors.Is(err, delivery.ErrTransient) || errors.Is(err, delivery.ErrClaimed) || ctx.Err() != nil:
			// Maybe displayed: it stays owed, and Recover announces it again.
			log.Warn().Err(err).Msg("completion not delivered yet; will retry")
		case isGone(err):
			reason := binding.ReasonThreadDelete
			if errors.Is(err, delivery.ErrForbidden) {
				reason = binding.ReasonNoPermission
			}
			if _, uerr := m.d.Bindings.Unbind(ctx, binding.UnbindInput{ID: dec.Binding.ID, Reason: reason}); uerr != nil {
				log.Error().Err(uerr).Msg("unbind after failed completion")
			}
			m.undeliverable(ctx, info, "its thread can no longer take messages")
		default:
			log.Error().Err(err).Msg("completion not delivered")
			m.undeliverable(ctx, info, "its thread refused the message")
		}
	case delivery.ModeClosed:
		// It was bound once: the thread is gone, archived, unfocused or
		// moved. Never re-route the result; drop a send still owed.
		if _, err := m.d.Outbound.Abandon(ctx, d.ID, "fail-closed: "+dec.Reason); err != nil {
			log.Error().Err(err).Msg("abandon completion")
		}
		m.undeliverable(ctx, info, "its thread is no longer bound (deleted, archived, locked, moved or unfocused)")
	default:
		log.Info().Msg("subagent was never bound: completion goes to the requester conversation")
		_, err := m.d.Outbound.Deliver(ctx, d, nil)
		switch {
		case err == nil:
			m.announced(ctx, info.Key)
		case errors.Is(err, delivery.ErrTransient) || errors.Is(err, delivery.ErrClaimed) || ctx.Err() != nil:
			log.Warn().Err(err).Msg("completion not delivered yet; will retry")
		default:
			// The requester conversation itself cannot take it: nowhere to
			// tell. The result is kept and the run says so.
			log.Error().Err(err).Msg("completion not delivered")
			m.updateInfo(ctx, info.Key, func(in *Info) { in.Status, in.AnnouncePending = StatusUndeliver, false })
		}
	}
}

// announced records that a completion reached its terminal outcome.
func (m *Manager) announced(ctx context.Context, key string) {
	m.updateInfo(ctx, key, func(in *Info) { in.AnnouncePending = false })
}

// announceID is the idempotency key of a subagent's completion.
func announceID(key string) string { return "announce:" + key + ":1" }

// undeliverable keeps the result, marks the run, and tells the requester
// without re-posting the result there. The status is written first and
// AnnouncePending cleared only after the notice, so a crash in between
// sends the notice at the restart (once: it has its own delivery id).
func (m *Manager) undeliverable(ctx context.Context, info Info, why string) {
	m.updateInfo(ctx, info.Key, func(in *Info) { in.Status = StatusUndeliver })
	m.d.Log.Warn().Str("session", info.Key).Str("why", why).Msg("completion not posted (fail-closed)")
	text := fmt.Sprintf("⚠️ Subagent **%s** finished, but %s, so its result was not posted anywhere. The result is kept: see /agents.", info.Label, why)
	_, err := m.d.Outbound.Deliver(ctx, delivery.Delivery{ID: "notice:" + info.Key + ":undelivered", Target: info.Requester, Text: text,
		Producer: delivery.Producer{Source: transcript.SourceNotice, AgentID: info.AgentID, Meta: map[string]string{"subagent": info.Key, "label": info.Label}}}, nil)
	if err != nil {
		m.d.Log.Error().Err(err).Str("session", info.Key).Msg("undeliverable notice failed")
		if errors.Is(err, delivery.ErrTransient) || errors.Is(err, delivery.ErrClaimed) || ctx.Err() != nil {
			return // owed: Recover retries the notice, a restart announces again
		}
	}
	m.announced(ctx, info.Key)
}

// OnBindingEnded posts the farewell for bindings that expired on their
// own or were unfocused, and tells a thread whose session moved elsewhere
// where it went; deleted, archived or locked threads get none (posting
// would unarchive them or fail: the sender checks every thread post).
func (m *Manager) OnBindingEnded(r binding.Record) {
	switch r.EndedReason {
	case binding.ReasonIdleExpired, binding.ReasonMaxAgeExpired, binding.ReasonManual, binding.ReasonMoved:
	default:
		return
	}
	if !m.work.Add() {
		m.d.Log.Warn().Str("binding", r.ID).Msg("farewell not posted: stopping")
		return
	}
	go func() {
		defer m.work.Done()
		ctx := context.WithoutCancel(m.baseCtx())
		_, err := m.d.Outbound.Deliver(ctx, delivery.Delivery{ID: "farewell:" + r.ID, Target: r.Conversation, Text: farewellText(r),
			Producer: delivery.Producer{Source: transcript.SourceFarewell}}, nil)
		if err != nil {
			m.d.Log.Warn().Err(err).Str("binding", r.ID).Msg("farewell not delivered")
		}
	}()
}
