package command

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/scheduler"
)

const (
	subKey  = "agent:main:subagent:1"
	mainKey = "agent:main:test:channel:chan-1"
)

var (
	channel = ref("chan-1", "")
	thread  = ref("thread-5", "chan-1")
	dm      = ref("user:u1", "")
	sub     = session.Info{Key: subKey, AgentID: "main", Kind: session.KindSubagent, Label: "lbl", Parent: mainKey, Requester: channel,
		SpawnedBy: "u1", Status: session.StatusRunning}
	boundAt = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
)

// outcome is what the invoker reads: the reply's text, "ERR <text>" for a
// user-facing error (FailureText without its sign), or "INTERNAL".
func outcome(r Reply, err error) string {
	if err == nil {
		return r.Text
	}
	text, internal := FailureText(err)
	if internal {
		return "INTERNAL"
	}
	return "ERR " + strings.TrimPrefix(text, "⚠️ ")
}

// TestCommands: every command's answer, as Discord's users read it (the
// texts of adapter/discord before the move, unchanged) and as a Matrix
// user reads it (no slash, no <@id>, no discord.* key: the invocation's
// platform words it). matrix "" means the same text as discord.
func TestCommands(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(w *world)
		cmd     string
		sub     string
		opts    map[string]any
		user    string
		where   binding.ConversationRef
		noBinds bool // the platform has thread bindings off
		discord string
		matrix  string
		public  bool
	}{
		{name: "reset", cmd: "reset",
			discord: "🧹 Started a new conversation here. Earlier messages stay in the record but are no longer in my context.", public: true},
		{name: "reset fails", setup: func(w *world) { w.sessions.resetErr = errInternal }, cmd: "reset", discord: "INTERNAL"},
		{name: "unknown command", cmd: "frob", discord: "ERR Unknown command /frob.", matrix: "ERR Unknown command !frob."},

		// /spawn
		{name: "spawn started in a thread", setup: func(w *world) {
			w.sessions.spawnRes = session.SpawnResult{Key: subKey, Label: "lbl", Thread: &thread}
		}, cmd: "spawn", opts: map[string]any{"task": "go", "thread": true},
			discord: "Started subagent **lbl** (`" + subKey + "`) in <#thread-5>.", matrix: "Started subagent **lbl** (`" + subKey + "`) in https://matrix.to/#/thread-5.", public: true},
		{name: "spawn without a thread", setup: func(w *world) {
			w.sessions.spawnRes = session.SpawnResult{Key: subKey, Label: "lbl", NoThreadReason: "thread bindings are off"}
		}, cmd: "spawn", opts: map[string]any{"task": "go"},
			discord: "Started subagent **lbl** (`" + subKey + "`) without a thread (thread bindings are off).", public: true},
		{name: "spawn empty task", setup: func(w *world) { w.sessions.spawnErr = session.ErrEmptyTask }, cmd: "spawn",
			discord: "ERR Give the subagent a task, e.g. /spawn task: summarise this channel.",
			matrix:  `ERR Give the subagent a task, e.g. !spawn task="summarise this channel".`},
		{name: "spawn unknown agent", setup: func(w *world) { w.sessions.spawnErr = session.ErrUnknownAgent }, cmd: "spawn",
			opts: map[string]any{"task": "go", "agent": "nobody"}, discord: `ERR There is no agent "nobody"; leave agent empty for the default.`},
		{name: "spawn too many", setup: func(w *world) { w.sessions.spawnErr = session.ErrTooManySubagents }, cmd: "spawn",
			opts: map[string]any{"task": "go"}, discord: "ERR Too many subagents are running; wait for one to finish. (too many subagents running)"},
		{name: "spawn may not create the thread", setup: func(w *world) { w.sessions.spawnErr = delivery.ErrForbidden }, cmd: "spawn",
			opts:    map[string]any{"task": "go"},
			discord: "ERR I may not create a thread here: give me Create Public Threads and Send Messages in Threads in this channel, or run /spawn with thread:false.",
			matrix:  "ERR I may not create a thread here: give me the power to send messages in this room, or run !spawn with thread=false."},
		{name: "spawn platform slow", setup: func(w *world) { w.sessions.spawnErr = delivery.ErrTransient }, cmd: "spawn",
			opts:    map[string]any{"task": "go"},
			discord: "ERR Discord did not answer in time; nothing was started. Try again in a moment.",
			matrix:  "ERR Matrix did not answer in time; nothing was started. Try again in a moment."},
		{name: "spawn internal error", setup: func(w *world) { w.sessions.spawnErr = errInternal }, cmd: "spawn",
			opts: map[string]any{"task": "go"}, discord: "INTERNAL"},
		{name: "spawn an external agent", setup: func(w *world) {
			w.acp.res = ACPStarted{Thread: thread, SessionKey: "acp:1", Created: true}
		}, cmd: "spawn", opts: map[string]any{"task": "fix it", "agent": "coder"},
			discord: "✅ Started **coder** in <#thread-5> (session `acp:1`).", matrix: "✅ Started **coder** in https://matrix.to/#/thread-5 (session `acp:1`).", public: true},
		{name: "spawn an external agent in its thread", setup: func(w *world) { w.acp.res = ACPStarted{Thread: thread, SessionKey: "acp:1"} },
			cmd: "spawn", opts: map[string]any{"task": "fix it", "agent": "coder"}, where: thread,
			discord: "✅ Bound this thread to a new **coder** session (`acp:1`).", public: true},
		{name: "external agent busy", setup: func(w *world) { w.acp.startErr = errors.Join(ErrTooManyACP, errInternal) }, cmd: "spawn",
			opts: map[string]any{"task": "x", "agent": "coder"}, discord: "ERR Too many coder sessions are running; wait for one to go idle."},
		{name: "external agent refused", setup: func(w *world) { w.acp.startErr = &authz.Refusal{Msg: "you may not start the ACP agent coder"} },
			cmd: "spawn", opts: map[string]any{"task": "x", "agent": "coder"}, discord: "ERR You may not start the ACP agent coder."},
		{name: "external agent may not create the thread", setup: func(w *world) { w.acp.startErr = delivery.ErrForbidden }, cmd: "spawn",
			opts:    map[string]any{"task": "x", "agent": "coder"},
			discord: "ERR I may not create a thread here: give me Create Public Threads and Send Messages in Threads in this channel.",
			matrix:  "ERR I may not create a thread here: give me the power to send messages in this room."},
		{name: "external agent platform slow", setup: func(w *world) { w.acp.startErr = delivery.ErrTransient }, cmd: "spawn",
			opts:    map[string]any{"task": "x", "agent": "coder"},
			discord: "ERR Discord did not answer in time; nothing was started. Try again in a moment.",
			matrix:  "ERR Matrix did not answer in time; nothing was started. Try again in a moment."},
		{name: "external agent in a DM", cmd: "spawn", opts: map[string]any{"task": "x", "agent": "coder"}, where: dm,
			discord: "ERR An external agent is bound to a thread: run this in a server channel or thread.",
			matrix:  "ERR An external agent is bound to a thread: run this in a room or a thread."},
		{name: "external agent: someone else's thread", setup: func(w *world) {
			w.bindings.bound[thread.Key()] = binding.Record{ID: "b1", BoundBy: "bob", Conversation: thread}
		}, cmd: "spawn", opts: map[string]any{"task": "x", "agent": "coder"}, where: thread,
			discord: "ERR Only <@bob> can rebind this thread.", matrix: "ERR Only bob can rebind this thread."},
		{name: "external agent without thread bindings", cmd: "spawn", opts: map[string]any{"task": "x", "agent": "coder"}, noBinds: true,
			discord: "ERR Thread bindings are disabled (set discord.threadBindings.enabled: true).",
			matrix:  "ERR Thread bindings are disabled (set matrix.threadBindings.enabled: true)."},

		// /stop
		{name: "stop: nothing running", cmd: "stop", discord: "ℹ️ Nothing is running in this conversation."},
		{name: "stop own turn", setup: func(w *world) {
			w.sessions.running[mainKey] = session.Run{ID: 1, Key: mainKey, Owner: "u1"}
			w.sessions.stopOK = true
		},
			cmd: "stop", discord: "⏹️ Stopped this conversation's turn."},
		{name: "stop: finished meanwhile", setup: func(w *world) { w.sessions.running[mainKey] = session.Run{ID: 1, Key: mainKey, Owner: "u1"} },
			cmd: "stop", discord: "ℹ️ It had already finished."},
		{name: "stop someone else's turn", setup: func(w *world) { w.sessions.running[mainKey] = session.Run{ID: 1, Key: mainKey, Owner: "bob"} },
			cmd: "stop", discord: "ERR Only its owner or an operator can stop this conversation's turn."},
		{name: "operator stops someone else's turn", setup: func(w *world) {
			w.sessions.running[mainKey] = session.Run{ID: 1, Key: mainKey, Owner: "bob"}
			w.sessions.stopOK = true
		}, cmd: "stop", user: "op", discord: "⏹️ Stopped this conversation's turn."},
		{name: "stop a subagent by label", setup: func(w *world) {
			w.sessions.infos = []session.Info{sub}
			w.sessions.running[subKey] = session.Run{ID: 2, Key: subKey, Owner: "u1"}
			w.sessions.stopOK = true
		}, cmd: "stop", opts: map[string]any{"target": "lbl"}, discord: "⏹️ Stopped **lbl**."},
		{name: "stop an idle subagent by key", setup: func(w *world) { w.sessions.infos = []session.Info{{Key: subKey}} },
			cmd: "stop", opts: map[string]any{"target": subKey}, discord: "ℹ️ `" + subKey + "` is not running."},
		{name: "stop: no such target", cmd: "stop", opts: map[string]any{"target": "ghost"},
			discord: "ERR Nothing is named ghost: give a subagent label or a session key (see /agents).",
			matrix:  "ERR Nothing is named ghost: give a subagent label or a session key (see !agents)."},
		{name: "stop the bound external agent", setup: func(w *world) {
			w.bindings.bound[thread.Key()] = binding.Record{ID: "b1", TargetKind: binding.KindACP, Conversation: thread}
			w.acp.stopText = "⏹️ Cancelled coder's turn."
		}, cmd: "stop", where: thread, discord: "⏹️ Cancelled coder's turn."},
		{name: "stop the bound external agent: refused", setup: func(w *world) {
			w.bindings.bound[thread.Key()] = binding.Record{ID: "b1", TargetKind: binding.KindACP, Conversation: thread}
			w.acp.stopErr = &authz.Refusal{Msg: "only the binder or an operator can stop it"}
		}, cmd: "stop", where: thread, discord: "ERR Only the binder or an operator can stop it."},

		// /ps
		{name: "ps in a thread bound to an external agent", setup: func(w *world) {
			w.bindings.bound[thread.Key()] = binding.Record{ID: "b1", TargetKind: binding.KindACP, Conversation: thread}
			w.acp.psText = "**coder** is running 1 command(s) here"
		}, cmd: "ps", where: thread, discord: "**coder** is running 1 command(s) here"},
		{name: "ps elsewhere", cmd: "ps",
			discord: "ERR /ps lists the commands of an external agent: run it in a thread bound to one (/spawn).",
			matrix:  "ERR !ps lists the commands of an external agent: run it in a thread bound to one (!spawn)."},

		// /focus
		{name: "focus without thread bindings", cmd: "focus", opts: map[string]any{"target": "lbl"}, noBinds: true,
			discord: "ERR Thread bindings are disabled (set discord.threadBindings.enabled: true).",
			matrix:  "ERR Thread bindings are disabled (set matrix.threadBindings.enabled: true)."},
		{name: "focus without a target", cmd: "focus",
			discord: "ERR Usage: /focus target:<subagent-label|session-key>", matrix: "ERR Usage: !focus target=<subagent-label|session-key>"},
		{name: "focus: unknown target", cmd: "focus", opts: map[string]any{"target": "ghost"}, discord: "ERR Unable to resolve focus target: ghost"},
		{name: "focus refused by the authority", setup: func(w *world) { w.sessions.infos = []session.Info{sub}; w.auth.refuseFocus = subKey },
			cmd: "focus", opts: map[string]any{"target": "lbl"}, discord: "ERR You cannot view " + subKey + "."},
		{name: "focus in a DM", setup: func(w *world) { w.sessions.infos = []session.Info{sub} }, cmd: "focus", opts: map[string]any{"target": "lbl"}, where: dm,
			discord: "ERR /focus must be run in a server channel or thread.", matrix: "ERR !focus must be run in a room or a thread."},
		{name: "focus onto someone else's thread", setup: func(w *world) {
			w.sessions.infos = []session.Info{sub}
			w.bindings.bound[thread.Key()] = binding.Record{ID: "b1", BoundBy: "bob", Conversation: thread}
		}, cmd: "focus", opts: map[string]any{"target": "lbl"}, where: thread,
			discord: "ERR Only <@bob> can refocus this conversation.", matrix: "ERR Only bob can refocus this conversation."},
		{name: "focus in a channel creates a thread", setup: func(w *world) { w.sessions.infos = []session.Info{sub} },
			cmd: "focus", opts: map[string]any{"target": "lbl"},
			discord: "✅ Created thread <#thread-9> and bound it to " + subKey + " (subagent).",
			matrix:  "✅ Created thread https://matrix.to/#/thread-9 and bound it to " + subKey + " (subagent).", public: true},
		{name: "focus moves the binding", setup: func(w *world) {
			w.sessions.infos = []session.Info{{Key: mainKey, AgentID: "main", Kind: session.KindMain, Requester: channel}}
			old := ref("thread-old", "chan-1")
			w.bindings.bound[old.Key()] = binding.Record{ID: "b0", TargetSessionKey: mainKey, Conversation: old}
		}, cmd: "focus", opts: map[string]any{"target": mainKey}, where: thread,
			discord: "✅ Bound this thread to " + mainKey + " (session). It was bound to <#thread-old> before; it is bound here only now.",
			matrix:  "✅ Bound this thread to " + mainKey + " (session). It was bound to https://matrix.to/#/thread-old before; it is bound here only now.", public: true},
		{name: "focus an external agent", setup: func(w *world) { w.acp.res = ACPStarted{Thread: thread, SessionKey: "acp:2"} },
			cmd: "focus", opts: map[string]any{"target": "acp:coder"}, where: thread, discord: "✅ Bound this thread to a new **coder** session (`acp:2`).", public: true},

		// /unfocus, /session unbind
		{name: "unfocus unbound", cmd: "unfocus", discord: "ℹ️ This conversation is not currently bound."},
		{name: "unfocus someone else's binding", setup: func(w *world) {
			w.bindings.bound[thread.Key()] = binding.Record{ID: "b1", BoundBy: "bob", Conversation: thread}
		}, cmd: "unfocus", where: thread, discord: "ERR Only <@bob> can unfocus this conversation.", matrix: "ERR Only bob can unfocus this conversation."},
		{name: "operator unbinds someone else's binding", setup: func(w *world) {
			w.bindings.bound[thread.Key()] = binding.Record{ID: "b1", BoundBy: "bob", Conversation: thread}
		}, cmd: "session", sub: "unbind", user: "op", where: thread, discord: "✅ Conversation unbound; messages here go to the channel's own agent again."},
		{name: "session unbind by another", setup: func(w *world) {
			w.bindings.bound[thread.Key()] = binding.Record{ID: "b1", BoundBy: "bob", Conversation: thread}
		}, cmd: "session", sub: "unbind", where: thread, discord: "ERR Only <@bob> can unbind this conversation.", matrix: "ERR Only bob can unbind this conversation."},

		// /session idle|max-age
		{name: "session idle unbound", cmd: "session", sub: "idle", discord: "ℹ️ This conversation is not currently bound."},
		{name: "session idle shows disabled", setup: func(w *world) { w.bindings.bound[thread.Key()] = binding.Record{ID: "b1", Conversation: thread} },
			cmd: "session", sub: "idle", where: thread, discord: "ℹ️ Idle timeout is currently disabled for this bound session."},
		{name: "session max-age shows active", setup: func(w *world) {
			w.bindings.bound[thread.Key()] = binding.Record{ID: "b1", Conversation: thread, MaxAge: 72 * time.Hour, BoundAt: boundAt}
		}, cmd: "session", sub: "max-age", where: thread, discord: "ℹ️ Max age active (72h, next auto-unbind at 2026-01-05T03:04:05Z)."},
		{name: "session idle set", setup: func(w *world) {
			w.bindings.bound[thread.Key()] = binding.Record{ID: "b1", BoundBy: "u1", Conversation: thread}
		},
			cmd: "session", sub: "idle", opts: map[string]any{"duration": "30m"}, where: thread, discord: "✅ Idle timeout set to 30m for this conversation's binding."},
		{name: "session max-age off", setup: func(w *world) {
			w.bindings.bound[thread.Key()] = binding.Record{ID: "b1", BoundBy: "u1", Conversation: thread}
		},
			cmd: "session", sub: "max-age", opts: map[string]any{"duration": "off"}, where: thread, discord: "✅ Max age disabled for this conversation's binding."},
		{name: "session idle set by another", setup: func(w *world) {
			w.bindings.bound[thread.Key()] = binding.Record{ID: "b1", BoundBy: "bob", Conversation: thread}
		},
			cmd: "session", sub: "idle", opts: map[string]any{"duration": "30m"}, where: thread,
			discord: "ERR Only <@bob> can update session lifecycle settings for this conversation.",
			matrix:  "ERR Only bob can update session lifecycle settings for this conversation."},
		{name: "session idle bad duration", setup: func(w *world) {
			w.bindings.bound[thread.Key()] = binding.Record{ID: "b1", BoundBy: "u1", Conversation: thread}
		},
			cmd: "session", sub: "idle", opts: map[string]any{"duration": "soon"}, where: thread,
			discord: "ERR Usage: /session idle <duration|off> | /session max-age <duration|off> | /session unbind (example: /session idle 24h)",
			matrix:  "ERR Usage: !session idle <duration|off> | !session max-age <duration|off> | !session unbind (example: !session idle 24h)"},

		// /agents
		{name: "agents none", cmd: "agents", discord: "agents:\n-----\n(none)\n"},
		{name: "agents bound and kept", setup: func(w *world) {
			kept := sub
			kept.Key, kept.Label, kept.Status, kept.Result, kept.Thread = "agent:main:subagent:2", "old", session.StatusUndeliver, "the answer", "thread-gone"
			w.sessions.infos = []session.Info{sub, kept}
			w.bindings.bound[thread.Key()] = binding.Record{ID: "b1", TargetSessionKey: subKey, Conversation: thread}
		}, cmd: "agents",
			discord: "agents:\n-----\n1. lbl (thread <#thread-5>) — running, `" + subKey + "`\n2. old (thread thread-gone (binding ended)) — undelivered, `agent:main:subagent:2`\n   result kept: the answer\n",
			matrix:  "agents:\n-----\n1. lbl (thread https://matrix.to/#/thread-5) — running, `" + subKey + "`\n2. old (thread thread-gone (binding ended)) — undelivered, `agent:main:subagent:2`\n   result kept: the answer\n"},

		// /cron
		{name: "cron without a scheduler", setup: func(w *world) { w.noJobs = true }, cmd: "cron", sub: "list",
			discord: "ERR The scheduler is disabled (scheduler.enabled: false)."},
		{name: "cron usage", cmd: "cron", sub: "frob", discord: "ERR Usage: /cron add|list|remove|run|runs", matrix: "ERR Usage: !cron add|list|remove|run|runs"},
		{name: "cron add refused", cmd: "cron", sub: "add", opts: map[string]any{"schedule": "every 10m", "prompt": "hi"},
			discord: "ERR Only an operator can schedule jobs."},
		{name: "cron add", cmd: "cron", sub: "add", user: "op", opts: map[string]any{"schedule": "every 10m", "prompt": "hi"},
			discord: "⏰ Job `j1` added (in-chat): every 10m in this chat", public: true},
		{name: "cron list empty", cmd: "cron", sub: "list", discord: "No jobs. Add one with /cron add.", matrix: "No jobs. Add one with !cron add."},
		{name: "cron list", setup: func(w *world) {
			w.jobs.jobs = []scheduler.Job{{ID: "j1", Name: "daily", StoredMode: scheduler.ModeInChat, Enabled: true}, {ID: "j2", Name: "bg", StoredMode: scheduler.ModeBackground}}
		}, cmd: "cron", sub: "list",
			discord: "• `j1` daily (in-chat, enabled): every 10m in this chat\n• `j2` bg (background, disabled): every 10m in this chat\n"},
		{name: "cron remove", cmd: "cron", sub: "remove", user: "op", opts: map[string]any{"id": "j1"}, discord: "🗑️ Job `j1` removed.", public: true},
		{name: "cron run", cmd: "cron", sub: "run", user: "op", opts: map[string]any{"id": "j1"}, discord: "▶️ Job `j1` ran: ok (delivery delivered).", public: true},
		{name: "cron runs none", cmd: "cron", sub: "runs", opts: map[string]any{"id": "j1"}, discord: "Job `j1` has not run yet."},
		{name: "cron runs", setup: func(w *world) {
			w.jobs.runs = []scheduler.Run{{StartedAt: boundAt, Status: "ok", Late: true, LateBy: 2 * time.Minute, Delivery: scheduler.RunDelivery{Status: "delivered"}}}
		}, cmd: "cron", sub: "runs", opts: map[string]any{"id": "j1"}, discord: "• 2026-01-02 03:04 ok (late by " + scheduler.HumanDuration(2*time.Minute) + ") — delivery delivered \n"},
		{name: "cron hint in the platform's syntax", setup: func(w *world) {
			w.jobs.err = &scheduler.UserError{Msg: `there is no job "nope"`, Err: scheduler.ErrNotFound, Hint: scheduler.HintListJobs}
		}, cmd: "cron", sub: "runs", opts: map[string]any{"id": "nope"},
			discord: "ERR there is no job \"nope\": `/cron list` shows the job ids", matrix: "ERR there is no job \"nope\": `!cron list` shows the job ids"},
		{name: "cron running-job hint", setup: func(w *world) {
			w.jobs.err = &scheduler.UserError{Msg: "job j1 is running right now; try again when it finished", Err: scheduler.ErrBusy, Hint: scheduler.HintJobRuns, JobID: "j1"}
		}, cmd: "cron", sub: "run", user: "op", opts: map[string]any{"id": "j1"},
			discord: "ERR job j1 is running right now; try again when it finished (`/cron runs j1`)",
			matrix:  "ERR job j1 is running right now; try again when it finished (`!cron runs j1`)"},
		{name: "cron internal error", setup: func(w *world) { w.jobs.err = errInternal }, cmd: "cron", sub: "list", discord: "INTERNAL"},
	}
	for _, tc := range tests {
		for _, p := range []struct {
			name  string
			words Platform
			want  string
		}{{"discord", discordWords, tc.discord}, {"matrix", matrixWords, tc.matrix}} {
			t.Run(tc.name+"/"+p.name, func(t *testing.T) {
				want := p.want
				if want == "" {
					want = tc.discord
				}
				w := newWorld()
				if tc.setup != nil {
					tc.setup(w)
				}
				v := Invocation{Platform: p.words, Conversation: tc.where, UserID: tc.user, Name: tc.cmd, Sub: tc.sub, Options: tc.opts}
				if v.UserID == "" {
					v.UserID = "u1"
				}
				if !v.Conversation.Valid() {
					v.Conversation = channel
				}
				v.Platform.ThreadBindings = !tc.noBinds
				r, err := w.commands().Run(context.Background(), v)
				if got := outcome(r, err); got != want {
					t.Errorf("reads\n%q\nwant\n%q", got, want)
				}
				if err == nil && r.Public != tc.public {
					t.Errorf("public = %v, want %v", r.Public, tc.public)
				}
			})
		}
	}
}
