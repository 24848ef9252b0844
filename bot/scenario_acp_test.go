package bot

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbot/agentbot/acp/acptest"
	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/config"
)

// Actions for ACP turns that outlive the outbox recovery's cutoff (issue
// 27.1): an external coding agent's turn waits on a person's click for as
// long as it takes, and a recovery pass meanwhile must leave its live
// messages alone (one owner per live message, invariant 19).

// scenarioACP is the scenario world's ACP agent (the scripted one).
const scenarioACP = "script"

// configureACP gives the world an ACP agent that users may start.
func configureACP(t *testing.T, h *harness, users []string) {
	t.Helper()
	h.cfg.ACP.Agents = map[string]config.ACPAgentConfig{scenarioACP: {
		Command: acptest.Build(t), Workspace: filepath.Join(t.TempDir(), "acp"), Users: users, MaxSessions: 8,
	}}
}

// acpAsk starts an ACP session whose first prompt asks permission to write
// a file, or asks again in a thread bound to one, then runs a recovery pass
// that takes every pending delivery as past its cutoff while that turn may
// be waiting on the person.
func (s *scenario) acpAsk() error {
	file := fmt.Sprintf("f%d.txt", s.rng.IntN(1000))
	prompt := fmt.Sprintf("tool t1 Write %s\nask t1 Write %s\nwrite %s by the agent\nupdate t1 completed", file, file, file)
	if ths := s.acpThreads(); len(ths) > 0 && s.rng.IntN(2) == 0 {
		th := s.pick(ths)
		s.note("ACP prompt in %s asking to write %s", th, file)
		if _, err := s.h.emu.UserSay(th, s.h.alice.ID, prompt); err != nil && !strings.Contains(err.Error(), "unknown") {
			return err
		}
	} else {
		ch := s.pick(s.channels)
		s.note("/spawn agent:%s in %s asking to write %s", scenarioACP, ch, file)
		if _, err := s.h.emu.InvokeCommand(ch, s.h.alice.ID, "spawn",
			discordtest.CommandOption{Name: "task", Value: prompt}, discordtest.CommandOption{Name: "agent", Value: scenarioACP}); err != nil {
			return err
		}
	}
	return s.recoverPastCutoff()
}

// recoverPastCutoff runs one pass of the outbox recovery with its cutoff an
// hour ahead: every pending record counts as abandoned by age alone.
func (s *scenario) recoverPastCutoff() error {
	s.note("recovery pass past every cutoff")
	if _, err := s.h.app.outbound.Recover(s.ctx, time.Now().Add(time.Hour)); err != nil {
		return fmt.Errorf("recovery pass: %w", err)
	}
	return nil
}

// acpAllow clicks Allow on a permission request still waiting, if any.
func (s *scenario) acpAllow() error {
	for _, th := range s.acpThreads() {
		for _, m := range s.h.emu.Messages(th) {
			for _, b := range m.Buttons() {
				if b.Label != "Allow" {
					continue
				}
				s.note("Allow on %s in %s", m.ID, th)
				_, err := s.h.emu.ClickButton(m.ID, s.h.alice.ID, b.CustomID)
				if err != nil && strings.Contains(err.Error(), "unknown") {
					return nil
				}
				return err
			}
		}
	}
	return nil
}

// acpThreads are the open threads an ACP session was bound to.
func (s *scenario) acpThreads() []string {
	var out []string
	for _, th := range s.openThreads() {
		for _, m := range s.h.emu.Messages(th) {
			if m.Author.ID == s.h.emu.BotUserID() && strings.Contains(m.Content, "**"+scenarioACP+"** (an external coding agent) is bound") {
				out = append(out, th)
				break
			}
		}
	}
	return out
}
