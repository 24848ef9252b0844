package bot

import (
	"fmt"
	"strings"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
)

// Scenario actions of issue 22: users edit and delete their messages
// addressed to the bot, a moderator deletes bot replies. The final Rule 1
// check (rule1Check) compares each conversation's model-visible history,
// after edits and deletions, with what it displays.

// recent is how many of a channel's newest messages the edit and delete
// actions choose from: a change the bot misses (its event arrives during a
// stop) is found at catch-up only in the recent window (README, "Edits and
// deletions").
const recent = 10

func newest(ms []discordtest.Message) []discordtest.Message {
	return ms[max(0, len(ms)-recent):]
}

// userMessages lists the recent displayed user messages addressed to the
// bot in the plain channels.
func (s *scenario) userMessages() []struct{ id, channel, author string } {
	var out []struct{ id, channel, author string }
	mention := "<@" + s.h.emu.BotUserID() + ">"
	for _, ch := range s.channels {
		for _, m := range newest(s.h.emu.Messages(ch)) {
			if m.WebhookID == "" && !m.Author.Bot && m.Author.ID != s.h.emu.BotUserID() && strings.Contains(m.Content, mention) {
				out = append(out, struct{ id, channel, author string }{m.ID, ch, m.Author.ID})
			}
		}
	}
	return out
}

func (s *scenario) editMessage() error {
	ms := s.userMessages()
	if len(ms) == 0 {
		return s.mention()
	}
	m := ms[s.rng.IntN(len(ms))]
	s.note("edit of %s in %s", m.id, m.channel)
	_, err := s.h.emu.UserEdit(m.id, fmt.Sprintf("<@%s> edited %d", s.h.emu.BotUserID(), s.rng.IntN(1000)))
	return err
}

func (s *scenario) deleteMessage() error {
	ms := s.userMessages()
	if len(ms) == 0 {
		return s.mention()
	}
	m := ms[s.rng.IntN(len(ms))]
	s.note("user deletes %s in %s", m.id, m.channel)
	return s.h.emu.UserDelete(m.author, m.id)
}

func (s *scenario) deleteBotMessage() error {
	var ids []string
	for _, ch := range s.channels {
		for _, m := range newest(s.h.emu.Messages(ch)) {
			if m.Author.ID == s.h.emu.BotUserID() && strings.HasPrefix(m.Content, "echo: ") {
				ids = append(ids, m.ID)
			}
		}
	}
	if len(ids) == 0 {
		return nil
	}
	id := s.pick(ids)
	s.note("moderator deletes bot message %s", id)
	return s.h.emu.DeleteMessage(id)
}

// askThenDelete has a user ask and delete the question at once: its turn is
// queued or running when the deletion arrives (it is cancelled and posts
// nothing), or its reply is already on its way (it stands).
func (s *scenario) askThenDelete() error {
	ch, user := s.pick(s.channels), s.pick(s.users)
	m, err := s.h.emu.UserSay(ch, user, fmt.Sprintf("<@%s> soon gone %d", s.h.emu.BotUserID(), s.rng.IntN(1000)))
	if err != nil {
		return err
	}
	s.note("mention %s in %s by %s, deleted at once", m.ID, ch, user)
	return s.h.emu.UserDelete(user, m.ID)
}

// askThenEdit has a user ask and fix the question at once: its turn runs
// again on the new text if its model call had not returned.
func (s *scenario) askThenEdit() error {
	ch, user := s.pick(s.channels), s.pick(s.users)
	m, err := s.h.emu.UserSay(ch, user, fmt.Sprintf("<@%s> qestion %d", s.h.emu.BotUserID(), s.rng.IntN(1000)))
	if err != nil {
		return err
	}
	s.note("mention %s in %s by %s, edited at once", m.ID, ch, user)
	_, err = s.h.emu.UserEdit(m.ID, fmt.Sprintf("<@%s> question %d", s.h.emu.BotUserID(), s.rng.IntN(1000)))
	return err
}

// editAddsMention has a user say something to the room, then edit the
// message to mention the bot: it starts a turn as a new mention would.
func (s *scenario) editAddsMention() error {
	ch, user := s.pick(s.channels), s.pick(s.users)
	n := s.rng.IntN(1000)
	m, err := s.h.emu.UserSay(ch, user, fmt.Sprintf("anyone? %d", n))
	if err != nil {
		return err
	}
	s.note("message %s in %s by %s, edited to mention the bot", m.ID, ch, user)
	_, err = s.h.emu.UserEdit(m.ID, fmt.Sprintf("<@%s> anyone? %d", s.h.emu.BotUserID(), n))
	return err
}
