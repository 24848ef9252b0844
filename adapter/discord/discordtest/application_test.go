package discordtest_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
)

func TestApplicationFlagsAndDisallowedIntents(t *testing.T) {
	t.Parallel()
	e := discordtest.NewTest(t, discordtest.Options{})
	s, err := e.NewSession()
	must(t, err)
	app := func() int {
		t.Helper()
		raw, err := s.RequestWithBucketID("GET", discordgo.EndpointApplication("@me"), nil, discordgo.EndpointApplication("@me"))
		must(t, err)
		var a struct {
			ID    string `json:"id"`
			Flags int    `json:"flags"`
		}
		must(t, json.Unmarshal(raw, &a))
		if a.ID != e.ApplicationID() {
			t.Fatalf("application id %s, want %s", a.ID, e.ApplicationID())
		}
		return a.Flags
	}
	if f := app(); f != discordtest.ApplicationFlagGatewayMessageContentLimited {
		t.Fatalf("default flags %d", f)
	}
	e.SetApplicationFlags(0)
	if f := app(); f != 0 {
		t.Fatalf("flags %d after SetApplicationFlags(0)", f)
	}
	// IDENTIFY with the Message Content intent is closed with 4014, as Discord does.
	s.ShouldReconnectOnError = false
	err = s.Open()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != 4014 {
		t.Fatalf("open without the intent allowed: err = %v, want close 4014", err)
	}
}

func TestListMyGuilds(t *testing.T) {
	t.Parallel()
	e := discordtest.NewTest(t, discordtest.Options{})
	a, b, c := e.AddGuild("a"), e.AddGuild("b"), e.AddGuild("c")
	must(t, e.SetRolePermissions(b.ID, b.ID, discordtest.DefaultEveryone))
	s, err := e.NewSession()
	must(t, err)
	gs, err := s.UserGuilds(0, "", "", true)
	must(t, err)
	if len(gs) != 3 || gs[0].ID != a.ID || gs[1].ID != b.ID || gs[2].ID != c.ID {
		t.Fatalf("guilds %+v", gs)
	}
	if gs[1].Permissions != discordtest.DefaultEveryone || gs[1].Owner || gs[1].ApproximateMemberCount != 2 {
		t.Fatalf("guild b: %+v", gs[1])
	}
	page, err := s.UserGuilds(1, "", a.ID, false)
	must(t, err)
	if len(page) != 1 || page[0].ID != b.ID {
		t.Fatalf("after %s limit 1: %+v", a.ID, page)
	}
	page, err = s.UserGuilds(0, c.ID, "", false)
	must(t, err)
	if len(page) != 2 {
		t.Fatalf("before %s: %+v", c.ID, page)
	}
	_, err = s.UserGuilds(201, "", "", false)
	if st, code := restCode(t, err); st != 400 || code != 50035 {
		t.Fatalf("limit 201: status %d code %d", st, code)
	}
}
