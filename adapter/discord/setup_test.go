package discord

import (
	"context"
	"strings"
	"testing"

	"github.com/bwmarrin/discordgo"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
)

// TestCheckerFindings: what the live check reports, where, and whether it
// is required, over a server set up as Discord sets one up.
func TestCheckerFindings(t *testing.T) {
	t.Parallel()
	type world struct {
		e               *discordtest.Emulator
		g               discordtest.Guild
		general, secret discordtest.Channel
	}
	setup := func(t *testing.T, botPerms int64) world {
		e := discordtest.NewTest(t, discordtest.Options{})
		g := e.AddGuild("lab")
		if err := e.SetRolePermissions(g.ID, g.ID, discordtest.DefaultEveryone); err != nil {
			t.Fatal(err)
		}
		if botPerms != 0 {
			r, err := e.AddRole(g.ID, "agentbot", botPerms)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.GrantRole(g.ID, e.BotUserID(), r.ID); err != nil {
				t.Fatal(err)
			}
		}
		w := world{e: e, g: g}
		var err error
		if w.general, err = e.AddTextChannel(g.ID, "general"); err != nil {
			t.Fatal(err)
		}
		if w.secret, err = e.AddTextChannel(g.ID, "secret"); err != nil {
			t.Fatal(err)
		}
		if err := e.SetOverwrite(w.secret.ID, discordtest.Overwrite{ID: g.ID, Type: discordtest.OverwriteRole, Deny: discordgo.PermissionViewChannel}); err != nil {
			t.Fatal(err)
		}
		return w
	}
	check := func(t *testing.T, w world, o CheckOptions) []Finding {
		t.Helper()
		o.Token, o.APIURL = w.e.Token(), w.e.URL()
		c, err := NewChecker(o)
		if err != nil {
			t.Fatal(err)
		}
		fs, err := c.Check(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return fs
	}
	summary := func(fs []Finding) []string {
		var out []string
		for _, f := range fs {
			s := f.Channel + ":" + f.MissingNames() + f.Problem
			if f.Required {
				s = "!" + s
			}
			out = append(out, s)
		}
		return out
	}
	tests := []struct {
		name     string
		botPerms int64
		opts     func(w world) CheckOptions
		want     []string
	}{
		{"invited with the URL: only the hidden channel, as a warning", InvitePermissions(),
			func(world) CheckOptions { return CheckOptions{ThreadBindings: true} }, []string{"#secret:View Channel"}},
		{"no bot role: @everyone lacks Manage Webhooks, once for the server", 0,
			func(world) CheckOptions { return CheckOptions{ThreadBindings: true} }, []string{"!:Manage Webhooks", "#secret:View Channel"}},
		{"no bot role, thread bindings off: nothing required", 0,
			func(world) CheckOptions { return CheckOptions{} }, []string{"#secret:View Channel"}},
		{"allow list naming the hidden channel: required", InvitePermissions(),
			func(w world) CheckOptions {
				return CheckOptions{ThreadBindings: true, AllowChannels: []string{w.general.ID, w.secret.ID}}
			}, []string{"!#secret:View Channel"}},
		{"denied channel not checked", InvitePermissions(),
			func(w world) CheckOptions {
				return CheckOptions{ThreadBindings: true, DenyChannels: []string{w.secret.ID}}
			}, nil},
		{"agents[].channels: an unknown id is named; the server, a channel and a Matrix room are not", InvitePermissions(),
			func(w world) CheckOptions {
				return CheckOptions{DenyChannels: []string{w.secret.ID}, Routes: map[string]string{
					w.g.ID: "main", w.general.ID: "scribe", "!room:example.org": "scribe", "999999999999999999": "scribe"}}
			}, []string{`!999999999999999999:agent "scribe"'s channels name 999999999999999999, which is no server, category or channel the bot serves`}},
		{"a served guild the bot is not in", InvitePermissions(),
			func(w world) CheckOptions { return CheckOptions{Guilds: []string{w.g.ID, "123456789012345678"}} },
			[]string{"!:the bot is not in this server (discord.guilds lists it)", "#secret:View Channel"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := setup(t, tc.botPerms)
			got := summary(check(t, w, tc.opts(w)))
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("findings %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("read-only channel: the bot's gap there is a warning", func(t *testing.T) {
		t.Parallel()
		w := setup(t, InvitePermissions())
		rules, err := w.e.AddTextChannel(w.g.ID, "rules")
		if err != nil {
			t.Fatal(err)
		}
		must(t, w.e.SetOverwrite(rules.ID, discordtest.Overwrite{ID: w.g.ID, Type: discordtest.OverwriteRole, Deny: discordgo.PermissionSendMessages}))
		must(t, w.e.SetOverwrite(w.general.ID, discordtest.Overwrite{ID: w.e.BotUserID(), Type: discordtest.OverwriteMember, Deny: discordgo.PermissionSendMessages}))
		got := summary(check(t, w, CheckOptions{ThreadBindings: true, DenyChannels: []string{w.secret.ID}}))
		// The bot's role does not override @everyone's channel deny: as Discord, a role allow would be needed.
		if want := "!#general:Send Messages|#rules:Send Messages"; strings.Join(got, "|") != want {
			t.Fatalf("findings %q, want %q", got, want)
		}
	})
	t.Run("intent off", func(t *testing.T) {
		t.Parallel()
		w := setup(t, InvitePermissions())
		w.e.SetApplicationFlags(0)
		fs := check(t, w, CheckOptions{DenyChannels: []string{w.secret.ID}})
		if len(fs) != 1 || !fs[0].Required || !strings.Contains(fs[0].Problem, "Message Content") || !strings.Contains(fs[0].Fix, w.e.ApplicationID()) {
			t.Fatalf("findings %+v", fs)
		}
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
