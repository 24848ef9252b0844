package discord

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
)

// TestPostLiveFiles: a live message with a file is one multipart create
// carrying the nonce: the emulator (as strict as Discord: payload_json,
// files[n], the attachments list naming them, the upload limit) shows
// the file, serves its bytes, and a repeated post returns the first
// message (no second message, no second file); an edit keeps the file;
// the shown attachment is what the transcript will record.
func TestPostLiveFiles(t *testing.T) {
	t.Parallel()
	e := discordtest.NewTest(t, discordtest.Options{})
	g := e.AddGuild("lab")
	ch, err := e.AddTextChannel(g.ID, "general")
	if err != nil {
		t.Fatal(err)
	}
	c := newTestClient(t, ClientOptions{Token: e.Token(), APIURL: e.URL(), RetryBackoff: time.Millisecond}, ClientDeps{Log: zerolog.Nop()})
	ctx := context.Background()
	data := strings.Repeat("output line\n", 1000)
	d := delivery.Delivery{ID: "acp:k:1:3", Target: binding.ConversationRef{Channel: "discord", ConversationID: ch.ID},
		Files: []delivery.File{{Name: "output.txt", ContentType: "text/plain; charset=utf-8", Data: []byte(data)}}}
	id, shown, err := c.PostLiveFiles(ctx, d, "📎 full output", delivery.Controls{})
	if err != nil {
		t.Fatal(err)
	}
	again, shown2, err := c.PostLiveFiles(ctx, d, "📎 full output", delivery.Controls{})
	if err != nil || again != id {
		t.Fatalf("repeated post: %s %v, want the first message %s", again, err, id)
	}
	if len(e.Messages(ch.ID)) != 1 {
		t.Fatalf("%d messages, want 1", len(e.Messages(ch.ID)))
	}
	m, _ := e.Message(id)
	if m.Content != "📎 full output" || len(m.Attachments) != 1 || m.Attachments[0].Filename != "output.txt" || m.Attachments[0].Size != len(data) {
		t.Fatalf("message %q with attachments %+v", m.Content, m.Attachments)
	}
	if len(shown) != 1 || shown[0].URL != m.Attachments[0].URL || shown[0].Size != int64(len(data)) || shown[0].ContentType != "text/plain; charset=utf-8" ||
		len(shown2) != 1 || shown2[0] != shown[0] {
		t.Fatalf("shown %+v then %+v, want the message's attachment %+v", shown, shown2, m.Attachments[0])
	}
	resp, err := http.Get(shown[0].URL)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(got) != data {
		t.Fatalf("the CDN serves %d bytes, want the %d uploaded", len(got), len(data))
	}
	if err := c.EditLive(ctx, d, id, "📎 full output (edited)", delivery.Controls{}); err != nil {
		t.Fatal(err)
	}
	if m, _ := e.Message(id); m.Content != "📎 full output (edited)" || len(m.Attachments) != 1 {
		t.Fatalf("after an edit: %q with %d attachments, want the file kept", m.Content, len(m.Attachments))
	}

	// Over the upload limit: refused (413), nothing posted.
	big := d
	big.ID = "acp:k:1:4"
	big.Files = []delivery.File{{Name: "output.txt", Data: make([]byte, discordtest.MaxUploadBytes+1)}}
	if _, _, err := c.PostLiveFiles(ctx, big, "too big", delivery.Controls{}); !errors.Is(err, delivery.ErrRejected) {
		t.Fatalf("a file over the limit: %v, want a permanent refusal", err)
	}
	if len(e.Messages(ch.ID)) != 1 {
		t.Fatal("a refused upload was posted")
	}
	if v := e.Violations(); len(v) != 0 {
		t.Fatalf("referee: %v", v)
	}
}

// TestEmulatorFilesStrict: the emulator refuses what Discord refuses: an
// attachments entry naming no uploaded file, a form without payload_json;
// and files on a route it does not take them on fail loudly.
func TestEmulatorFilesStrict(t *testing.T) {
	t.Parallel()
	e := discordtest.NewTest(t, discordtest.Options{})
	g := e.AddGuild("lab")
	ch, err := e.AddTextChannel(g.ID, "general")
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	file := []*discordgo.File{{Name: "a.txt", ContentType: "text/plain", Reader: strings.NewReader("a")}}
	post := func(body any, files []*discordgo.File) error {
		ct, form, err := discordgo.MultipartBodyWithJSON(body, files)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.RequestRaw("POST", discordgo.EndpointChannelMessages(ch.ID), ct, form, "", 0)
		return err
	}
	if err := post(map[string]any{"allowed_mentions": noPings, "attachments": []map[string]any{{"id": 1, "filename": "a.txt"}}}, file); err == nil {
		t.Error("an attachments entry naming files[1] with only files[0] uploaded was taken")
	}
	file[0].Reader = strings.NewReader("a")
	if err := post(map[string]any{"allowed_mentions": noPings}, file); err != nil {
		t.Errorf("a file without content: %v, want it posted", err)
	}
	hook, err := s.WebhookCreate(ch.ID, "persona", "")
	if err != nil {
		t.Fatal(err)
	}
	file[0].Reader = strings.NewReader("a")
	if _, err := s.WebhookExecute(hook.ID, hook.Token, true, &discordgo.WebhookParams{Content: "x", AllowedMentions: noPings, Files: file}); err == nil {
		t.Error("the emulator took a file on a webhook execute (it does not show them)")
	}
	if n := len(e.Messages(ch.ID)); n != 1 {
		t.Fatalf("%d messages, want only the file post", n)
	}
}
