package bot

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/core/notes"
	"github.com/agentbot/agentbot/model"
	"github.com/agentbot/agentbot/model/echo"
)

// systemSpy is the echo model, recording each request's system prompt
// and the tools offered, by the last user message's text.
type systemSpy struct {
	echo model.Provider
	mu   sync.Mutex
	reqs []model.Request
}

func (s *systemSpy) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	s.mu.Unlock()
	return s.echo.Complete(ctx, req)
}

// request returns the first request whose last user message holds marker.
func (s *systemSpy) request(t *testing.T, marker string) model.Request {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.reqs {
		for i := len(r.Messages) - 1; i >= 0; i-- {
			if r.Messages[i].Role == model.RoleUser {
				if strings.Contains(r.Messages[i].Text, marker) {
					return r
				}
				break
			}
		}
	}
	t.Fatalf("no model request for %q", marker)
	return model.Request{}
}

// notesWorld: #general and #other of one guild; olga operates it (a role
// with Manage Server), bob is a member; memory and notes on.
type notesWorld struct {
	*memoryWorld
	spy         *systemSpy
	olga, carol discordtest.User
	other       discordtest.Channel
}

func notesStart(t *testing.T) *notesWorld {
	t.Helper()
	spy := &systemSpy{echo: echo.New()}
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	h, err := newHarness(harnessOptions{Dir: t.TempDir(), Log: log, Provider: spy,
		Configure: func(c *config.Config) { c.Memory.Enabled = true }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.close() })
	w := &notesWorld{memoryWorld: &memoryWorld{harness: h}, spy: spy}
	e, g := h.emu, h.guild.ID
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(e.SetRolePermissions(g, g, discordtest.DefaultEveryone))
	w.bob, err = e.AddMember(g, "bob")
	must(err)
	w.olga, err = e.AddMember(g, "olga")
	must(err)
	ops, err := e.AddRole(g, "ops", discordtest.DefaultEveryone|discordgo.PermissionManageGuild)
	must(err)
	must(e.GrantRole(g, w.olga.ID, ops.ID))
	w.other, err = e.AddTextChannel(g, "other")
	must(err)
	if err := h.start(t.Context()); err != nil {
		t.Fatal(err)
	}
	return w
}

var noteID = regexp.MustCompile(`note ([a-z2-9]{8}) \(`)

// remember asks the agent (as user, in channel) to write a note and
// returns the tool's result.
func (w *notesWorld) remember(t *testing.T, channel, user, text, scope string) string {
	t.Helper()
	_, reply := w.ask(t, channel, user, "\n"+fmt.Sprintf(`!tool remember {"text": %q, "scope": %q}`, text, scope))
	out, ok := strings.CutPrefix(reply.Content, "tool results:\n- remember: ")
	if !ok {
		t.Fatalf("remember answered %q", reply.Content)
	}
	return out
}

// mustRemember is remember that must succeed; it returns the note's id
// and checks the note is displayed as a bot message.
func (w *notesWorld) mustRemember(t *testing.T, channel, user, text, scope string) string {
	t.Helper()
	out := w.remember(t, channel, user, text, scope)
	m := noteID.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("remember %q (%s) answered %q", text, scope, out)
	}
	want := notes.Display(notes.Scope(scope), text, m[1])
	if !slices.ContainsFunc(w.emu.Messages(channel), func(x discordtest.Message) bool {
		return x.Author.ID == w.emu.BotUserID() && x.Content == want
	}) {
		t.Fatalf("note %s is not displayed as %q", m[1], want)
	}
	return m[1]
}

// system is the system prompt of the turn user starts with marker in channel.
func (w *notesWorld) system(t *testing.T, channel, user, marker string) string {
	t.Helper()
	w.ask(t, channel, user, marker)
	return w.spy.request(t, marker).System
}

// command runs a slash command as user in channel and returns its answer.
func (w *notesWorld) command(t *testing.T, channel, user, sub string, opts ...discordtest.CommandOption) (string, bool) {
	t.Helper()
	in, err := w.emu.InvokeCommand(channel, user, "memory", discordtest.CommandOption{Name: sub, Value: opts})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	ans, inter, err := w.emu.WaitAnswer(ctx, in.ID)
	if err != nil {
		t.Fatal(err)
	}
	return ans.Content, inter.Responses[0].Ephemeral
}

// displayed reports whether channel shows a note (a bot message) holding text.
func (w *notesWorld) displayed(channel, text string) bool {
	return slices.ContainsFunc(w.emu.Messages(channel), func(x discordtest.Message) bool {
		return x.Author.ID == w.emu.BotUserID() && strings.HasPrefix(x.Content, "📝 Noted") && strings.Contains(x.Content, text)
	})
}

// TestNotesE2E: a note is a displayed bot message (in the transcript:
// Rule 1 at the end), given to the model in its scope and not out of it,
// listed by /memory list, forgotten when its message is deleted (by
// anyone) or by forget (its author, an operator; never a stranger);
// turned off, the next turn gets neither the tools nor the notes.
func TestNotesE2E(t *testing.T) {
	t.Parallel()
	w := notesStart(t)
	gen, oth, alice, bob, olga := w.general.ID, w.other.ID, w.alice.ID, w.bob.ID, w.olga.ID

	me := w.mustRemember(t, gen, alice, "alice drinks oolong", "me")
	here := w.mustRemember(t, gen, alice, "general measures in metric", "here")
	server := w.mustRemember(t, gen, olga, "the server motto is kiwi", "server")
	if out := w.remember(t, gen, bob, "bob rules the server", "server"); !strings.Contains(out, "refused: only an operator") || w.displayed(gen, "bob rules") {
		t.Fatalf("bob's server note: %q (displayed: %v); want a refusal and no message", out, w.displayed(gen, "bob rules"))
	}

	for _, tc := range []struct {
		channel, user, marker string
		want, never           []string
	}{
		{gen, alice, "m-alice-general", []string{"oolong", "metric", "kiwi"}, nil},
		{oth, alice, "m-alice-other", []string{"oolong", "kiwi"}, []string{"metric"}},
		{gen, bob, "m-bob-general", []string{"metric", "kiwi"}, []string{"oolong"}},
		{oth, bob, "m-bob-other", []string{"kiwi"}, []string{"oolong", "metric"}},
	} {
		sys := w.system(t, tc.channel, tc.user, tc.marker)
		for _, s := range tc.want {
			if !strings.Contains(sys, s) {
				t.Errorf("%s: the system prompt lacks %q:\n%s", tc.marker, s, sys)
			}
		}
		for _, s := range tc.never {
			if strings.Contains(sys, s) {
				t.Errorf("%s: the system prompt holds %q, out of its scope:\n%s", tc.marker, s, sys)
			}
		}
	}

	// /memory list: the caller's, this conversation's and this server's
	// notes, to the caller alone.
	if ans, eph := w.command(t, gen, alice, "list"); !eph || !strings.Contains(ans, me) || !strings.Contains(ans, here) || !strings.Contains(ans, server) {
		t.Fatalf("alice's /memory list: %q (ephemeral %v)", ans, eph)
	}
	if ans, _ := w.command(t, oth, bob, "list"); strings.Contains(ans, me) || strings.Contains(ans, here) || !strings.Contains(ans, server) {
		t.Fatalf("bob's /memory list in #other: %q; want the server note only", ans)
	}

	// A stranger may not forget: neither the tool nor the command.
	if _, reply := w.ask(t, gen, bob, "\n"+`!tool forget {"id": "`+me+`"}`); !strings.Contains(reply.Content, "refused: there is no note") {
		t.Fatalf("bob's forget answered %q", reply.Content)
	}
	if ans, eph := w.command(t, gen, bob, "forget", discordtest.CommandOption{Name: "id", Value: here}); !eph || !strings.Contains(ans, "no note") {
		t.Fatalf("bob's /memory forget answered %q (ephemeral %v)", ans, eph)
	}
	if !w.displayed(gen, "oolong") || !w.displayed(gen, "metric") {
		t.Fatal("a stranger's forget deleted a note's message")
	}

	// Deleting a note's message (by anyone: a moderator here) forgets it.
	var hereMsg string
	for _, x := range w.emu.Messages(gen) {
		if strings.HasPrefix(x.Content, "📝 Noted") && strings.HasSuffix(x.Content, "note "+here) {
			hereMsg = x.ID
		}
	}
	if err := w.emu.DeleteMessage(hereMsg); err != nil {
		t.Fatal(err)
	}
	w.ask(t, gen, alice, "barrier") // the gateway's events are handled in order: the deletion is recorded
	if sys := w.system(t, gen, alice, "m-after-delete"); strings.Contains(sys, "metric") || !strings.Contains(sys, "oolong") {
		t.Fatalf("after its message was deleted the note is still given:\n%s", sys)
	}
	if _, ok, err := w.app.store.Note(t.Context(), here); ok || err != nil {
		t.Fatalf("note %s still recorded (%v)", here, err)
	}

	// Its author forgets with the tool: the message is deleted.
	if _, reply := w.ask(t, gen, alice, "\n"+`!tool forget {"id": "`+me+`"}`); !strings.Contains(reply.Content, "forgot note "+me) {
		t.Fatalf("alice's forget answered %q", reply.Content)
	}
	if w.displayed(gen, "oolong") {
		t.Fatal("the forgotten note's message is still displayed")
	}

	// Turned off (what SIGHUP applies): the next turn gets neither the
	// tools nor the notes.
	w.app.SetNotes(false)
	if sys := w.system(t, gen, alice, "m-off"); strings.Contains(sys, "kiwi") {
		t.Fatalf("with notes off the turn was given notes:\n%s", sys)
	}
	if tools := w.spy.request(t, "m-off").Tools; slices.ContainsFunc(tools, func(tl model.Tool) bool { return tl.Name == notes.ToolRemember || tl.Name == notes.ToolForget }) {
		t.Fatalf("with notes off the turn was offered %v", tools)
	}
	if _, reply := w.ask(t, gen, alice, "\n"+`!tool remember {"text": "off note", "scope": "here"}`); !strings.Contains(reply.Content, "not available") || w.displayed(gen, "off note") {
		t.Fatalf("with notes off remember answered %q", reply.Content)
	}
	if ans, _ := w.command(t, gen, alice, "list"); !strings.Contains(ans, "off") {
		t.Fatalf("with notes off /memory list answered %q", ans)
	}
	w.app.SetNotes(true)

	// An operator forgets a note with the command.
	if ans, eph := w.command(t, gen, olga, "forget", discordtest.CommandOption{Name: "id", Value: server}); !eph || !strings.Contains(ans, "Forgot note `"+server+"`") {
		t.Fatalf("olga's /memory forget answered %q (ephemeral %v)", ans, eph)
	}
	if w.displayed(gen, "kiwi") {
		t.Fatal("the forgotten server note's message is still displayed")
	}
	if sys := w.system(t, oth, bob, "m-last"); strings.Contains(sys, "kiwi") {
		t.Fatalf("a forgotten note is still given:\n%s", sys)
	}
	if ns, err := w.app.Notes(t.Context()); err != nil || len(ns) != 0 {
		t.Fatalf("notes left: %+v %v", ns, err)
	}
	finishBot(t, w.harness, gen, oth).Close()
}
