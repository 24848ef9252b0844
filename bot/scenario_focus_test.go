package bot

import (
	"fmt"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/core/session"
)

// Scenario actions of issue 12: /focus (into a channel's new thread or an
// existing thread, also onto a subagent bound elsewhere, which moves it)
// and spawns by a non-default agent.

// focus runs /focus onto a random subagent in a random channel or thread.
func (s *scenario) focus() error {
	subs := s.h.app.sessions.Sessions(func(in session.Info) bool { return in.Kind == session.KindSubagent })
	if len(subs) == 0 {
		return s.spawn()
	}
	target := subs[s.rng.IntN(len(subs))].Key
	where := s.pick(s.channels)
	if ths := s.threads(); len(ths) > 0 && s.rng.IntN(2) == 0 {
		where = s.pick(ths)
		if c, ok := s.h.emu.Channel(where); !ok || c.Locked || c.Archived {
			return nil
		}
	}
	s.note("/focus %s in %s", target, where)
	_, err := s.h.emu.InvokeCommand(where, s.pick(s.users), "focus", discordtest.CommandOption{Name: "target", Value: target})
	return err
}

// spawnOther spawns a subagent of the second agent.
func (s *scenario) spawnOther() error {
	ch := s.pick(s.channels)
	opts := []discordtest.CommandOption{{Name: "task", Value: fmt.Sprintf("research %d", s.rng.IntN(1000))}, {Name: "agent", Value: scenarioOtherAgent}}
	if s.rng.IntN(2) == 0 {
		opts = append(opts, discordtest.CommandOption{Name: "thread", Value: s.rng.IntN(2) == 0})
	}
	s.note("/spawn agent:%s in %s %v", scenarioOtherAgent, ch, opts)
	_, err := s.h.emu.InvokeCommand(ch, s.pick(s.users), "spawn", opts...)
	return err
}

const scenarioOtherAgent = "researcher"
