package bot

import "fmt"

// Actions for the paths issue 27 found broken where two mechanisms meet: a
// thread deleted after its binding ended (its messages must be erased by id,
// wherever they are), and a turn with a tool round interrupted by a stop (a
// streamed turn's first round must never read as its answer).

// unfocusThenDelete ends a thread's binding and then deletes the thread.
func (s *scenario) unfocusThenDelete() error {
	ths := s.openThreads()
	if len(ths) == 0 {
		return nil
	}
	th := s.pick(ths)
	s.note("/unfocus in %s, then delete it", th)
	if _, err := s.h.emu.InvokeCommand(th, s.h.alice.ID, "unfocus"); err != nil {
		return err
	}
	return s.h.emu.DeleteChannel(th)
}

// toolRoundThenRestart asks for a tool call (a send_message round before
// the answer) and stops the bot at once, while that turn may be between
// its rounds; the restart must finish it or say it was interrupted.
func (s *scenario) toolRoundThenRestart() error {
	from, to := s.pick(s.channels), s.pick(s.channels)
	text := fmt.Sprintf("<@%s> relay then answer\n!tool send_message {\"to\":\"channel:%s\",\"text\":\"round %d\"}", s.h.emu.BotUserID(), to, s.rng.IntN(1000))
	s.note("send_message round from %s to %s, then restart", from, to)
	if _, err := s.h.emu.UserSay(from, s.pick(s.users), text); err != nil {
		return err
	}
	return s.restart()
}
