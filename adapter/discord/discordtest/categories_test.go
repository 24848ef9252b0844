package discordtest_test

import (
	"testing"

	"github.com/bwmarrin/discordgo"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
)

// TestCategories: a category and a text channel moved into it read back
// over REST with the channel's parent_id and its overwrites intact; a
// CHANNEL_UPDATE carries the move (and the move out); only a text channel
// moves, and only into a category of its own guild.
func TestCategories(t *testing.T) {
	t.Parallel()
	f := newFixture(t, discordtest.Options{})
	updates := make(chan *discordgo.Channel, 4)
	openSession(t, f.e, func(s *discordgo.Session) {
		s.AddHandler(func(_ *discordgo.Session, u *discordgo.ChannelUpdate) { updates <- u.Channel })
	})
	s := restSession(t, f.e)
	cat, err := f.e.AddCategory(f.guild.ID, "meetings")
	must(t, err)
	must(t, f.e.SetOverwrite(f.ch.ID, discordtest.Overwrite{ID: f.guild.ID, Type: discordtest.OverwriteRole, Deny: discordgo.PermissionSendMessages}))
	must(t, f.e.MoveChannel(f.ch.ID, cat.ID))
	ch, err := s.Channel(f.ch.ID)
	must(t, err)
	if ch.ParentID != cat.ID || len(ch.PermissionOverwrites) != 1 {
		t.Fatalf("moved channel reads parent %q, %d overwrites; want %s and 1", ch.ParentID, len(ch.PermissionOverwrites), cat.ID)
	}
	got, err := s.Channel(cat.ID)
	must(t, err)
	if got.Type != discordgo.ChannelTypeGuildCategory {
		t.Fatalf("category reads type %d", got.Type)
	}
	// waitParent waits for a CHANNEL_UPDATE of the channel naming parent
	// (SetOverwrite sent one before the move).
	waitParent := func(parent string) {
		t.Helper()
		for {
			select {
			case u := <-updates:
				if u.ID == f.ch.ID && u.ParentID == parent {
					return
				}
			case <-ctxT(t).Done():
				t.Fatalf("no CHANNEL_UPDATE with parent %q", parent)
			}
		}
	}
	waitParent(cat.ID)
	must(t, f.e.MoveChannel(f.ch.ID, ""))
	waitParent("")
	other := f.e.AddGuild("other")
	otherCat, err := f.e.AddCategory(other.ID, "x")
	must(t, err)
	if err := f.e.MoveChannel(f.ch.ID, otherCat.ID); err == nil {
		t.Fatal("moved a channel into another guild's category")
	}
	if err := f.e.MoveChannel(cat.ID, ""); err == nil {
		t.Fatal("moved a category")
	}
}
