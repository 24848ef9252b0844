package discordtest_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
)

// TestMentionsRequired: every request that creates or edits a message is
// rejected (400, and recorded as an "allowed_mentions" violation, which
// NewTest's cleanup and the end-to-end teardown fail on) unless it carries
// allowed_mentions with parse [] and nothing else allowed (invariant 12).
func TestMentionsRequired(t *testing.T) {
	t.Parallel()
	// Many edits of one channel's messages in a row: the edit limit is
	// raised here (this test is about mentions, not pacing).
	f := newFixture(t, discordtest.Options{RateLimits: []discordtest.RateLimit{{Method: "PATCH", Route: discordtest.EditLimit.Route, Limit: 1000, Window: time.Second}}})
	s := restSession(t, f.e)
	app := f.e.ApplicationID()
	_, err := s.ApplicationCommandBulkOverwrite(app, f.guild.ID, []*discordgo.ApplicationCommand{{Name: "ping", Description: "p"}})
	must(t, err)
	in, err := f.e.InvokeCommand(f.ch.ID, f.alice.ID, "ping")
	must(t, err)
	hook, err := s.WebhookCreate(f.ch.ID, "hook", "")
	must(t, err)
	botMsg, err := sendQuiet(s, f.ch.ID, "mine")
	must(t, err)
	hookMsg, err := s.WebhookExecute(hook.ID, hook.Token, true, &discordgo.WebhookParams{Content: "hooked", AllowedMentions: quiet()})
	must(t, err)

	quietAM := map[string]any{"parse": []string{}}
	bad := map[string]any{ // nil value: the field is omitted
		"omitted":      nil,
		"null":         json.RawMessage("null"),
		"parse null":   map[string]any{"parse": nil},
		"everyone":     map[string]any{"parse": []string{"everyone"}},
		"users parsed": map[string]any{"parse": []string{"users"}},
		"a role":       map[string]any{"parse": []string{}, "roles": []string{"1"}},
		"replied user": map[string]any{"parse": []string{}, "replied_user": true},
	}
	withAM := func(body map[string]any, am any) map[string]any {
		out := map[string]any{}
		for k, v := range body {
			out[k] = v
		}
		if am != nil {
			out["allowed_mentions"] = am
		}
		return out
	}
	content := map[string]any{"content": "hi @everyone"}
	kinds := []struct {
		name, method, endpoint string
		body                   func(am any) map[string]any
	}{
		{"channel send", "POST", discordgo.EndpointChannelMessages(f.ch.ID), func(am any) map[string]any { return withAM(content, am) }},
		{"message edit", "PATCH", discordgo.EndpointChannelMessage(f.ch.ID, botMsg.ID), func(am any) map[string]any { return withAM(content, am) }},
		{"webhook execute", "POST", discordgo.EndpointWebhookToken(hook.ID, hook.Token) + "?wait=true", func(am any) map[string]any { return withAM(content, am) }},
		{"webhook message edit", "PATCH", discordgo.EndpointWebhookMessage(hook.ID, hook.Token, hookMsg.ID), func(am any) map[string]any { return withAM(content, am) }},
		{"interaction response", "POST", discordgo.EndpointInteractionResponse(in.ID, in.Token), func(am any) map[string]any {
			return map[string]any{"type": 4, "data": withAM(content, am)}
		}},
		{"followup", "POST", discordgo.EndpointFollowupMessage(app, in.Token), func(am any) map[string]any { return withAM(content, am) }},
		{"original edit", "PATCH", discordgo.EndpointInteractionResponseActions(app, in.Token), func(am any) map[string]any { return withAM(content, am) }},
	}
	for _, k := range kinds {
		for name, am := range bad {
			before := len(f.e.Violations())
			_, err := s.RequestWithBucketID(k.method, k.endpoint, k.body(am), k.endpoint)
			var re *discordgo.RESTError
			if !errors.As(err, &re) || re.Response.StatusCode != http.StatusBadRequest {
				t.Errorf("%s with allowed_mentions %s: err = %v, want 400", k.name, name, err)
				continue
			}
			vs := f.e.Violations()
			if len(vs) != before+1 || vs[len(vs)-1].Kind != "allowed_mentions" {
				t.Errorf("%s with allowed_mentions %s: violations %v, want one allowed_mentions violation", k.name, name, vs[before:])
			}
		}
		if _, err := s.RequestWithBucketID(k.method, k.endpoint, k.body(quietAM), k.endpoint); err != nil {
			t.Errorf("%s with parse []: %v", k.name, err)
		}
		// One user explicitly allowed (a command that mentions its caller) is fine.
		if k.method == "PATCH" || k.name == "channel send" || k.name == "followup" {
			if _, err := s.RequestWithBucketID(k.method, k.endpoint, k.body(map[string]any{"parse": []string{}, "users": []string{f.alice.ID}}), k.endpoint); err != nil {
				t.Errorf("%s allowing one user: %v", k.name, err)
			}
		}
	}
	f.e.ResetViolations() // provoked on purpose; NewTest's cleanup would fail the test
}
