package bot

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentbot/agentbot/acp/acptest"
	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/store/bolt"
)

// TestE2EACPMessageTakenOnceAcrossRestart: a user message of a thread bound
// to an ACP session is taken by that session; a restart's catch-up reads
// the thread again (the message is past the catch-up floor). Whether the
// thread still routes to the ACP session or /focus moved it onto a
// channel's session meanwhile, the message is in exactly one transcript
// (the ACP session's: where it routed when it was displayed), the agent
// was prompted with it once, and transcript == display (Rule 1). On the
// old dispatch the session-or-ACP routing looked the binding up apart from
// the sessions and only the sessions marked a message taken: after the
// /focus the catch-up wrote the message again into the channel's session
// and answered it there; without the /focus the agent ran the prompt a
// second time (its messages reused the first run's delivery ids, so only
// its side effects showed it).
func TestE2EACPMessageTakenOnceAcrossRestart(t *testing.T) {
	for _, focus := range []bool{true, false} {
		name := "still bound"
		if focus {
			name = "focused elsewhere"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			prompts := filepath.Join(t.TempDir(), "prompts.log")
			h, _ := acpBot(t, "script", func(h *harness, c *config.ACPAgentConfig) {
				c.Command = acptest.Build(t)
				c.Sandbox = config.SandboxNone
				c.Env = map[string]string{"SCRIPTAGENT_LOG": prompts}
			})
			// A message the sessions take in #general: the catch-up's
			// floor (a minute before the newest watermark) lies before
			// everything below, so the restart reads the thread again.
			adSay(t, h, h.general.ID, "<@"+h.emu.BotUserID()+"> hello")
			acpMessage(t, h, h.general.ID, "hello")
			thread := acpSpawn(t, h, "script", "say ready")
			acpMessage(t, h, thread.ID, "ready")
			msg, err := h.emu.UserSay(thread.ID, h.alice.ID, "say answered once")
			if err != nil {
				t.Fatal(err)
			}
			acpMessage(t, h, thread.ID, "answered once")
			if focus {
				var main string
				for _, in := range h.app.sessions.Sessions(func(in session.Info) bool { return in.Kind == session.KindMain }) {
					if strings.HasSuffix(in.Key, ":"+h.general.ID) {
						main = in.Key
					}
				}
				if main == "" {
					t.Fatal("no session of #general")
				}
				r := adResponded(t, h, adInvoke(t, h, thread.ID, "focus", discordtest.CommandOption{Name: "target", Value: main}))
				if !strings.Contains(r.Content, "Bound this thread") {
					t.Fatalf("/focus answered %q", r.Content)
				}
			}
			if err := h.stop(); err != nil {
				t.Fatal(err)
			}
			if err := h.start(t.Context()); err != nil {
				t.Fatal(err)
			}
			// The catch-up is queued ahead of live events, and the thread's
			// messages are answered in order (by the agent, or after the
			// /focus by #general's session): once a new message of the
			// thread is answered, a second answer of the old one would
			// be displayed.
			adSay(t, h, thread.ID, "say second")
			acpMessage(t, h, thread.ID, "second")
			st := finishBot(t, h, h.general.ID, thread.ID)
			if n := countContaining(h.emu.Messages(thread.ID), "answered once"); n != 2 {
				t.Errorf("thread shows %q %d times, want 2 (the prompt and one answer)", "answered once", n)
			}
			// The display alone cannot tell: a second prompt's messages
			// reuse the first one's delivery ids. The agent's own log can.
			log, err := os.ReadFile(prompts)
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(string(log), `"say answered once"`); n != 1 {
				t.Errorf("the agent was prompted with the message %d times, want once", n)
			}
			holders := messageHolders(t, st, msg.ID)
			if len(holders) != 1 || !strings.Contains(holders[0], "acp") {
				t.Errorf("message %s is in the transcripts of %v, want exactly the ACP session's", msg.ID, holders)
			}
		})
	}
}

// messageHolders lists, once per entry, the sessions whose transcripts
// hold a user entry of message id.
func messageHolders(t *testing.T, st *bolt.Store, id string) []string {
	t.Helper()
	keys, err := st.Sessions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, k := range keys {
		es, err := st.Range(t.Context(), k, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			if e.Role == transcript.RoleUser && slices.Contains(e.MessageIDs, id) {
				out = append(out, k)
			}
		}
	}
	return out
}
