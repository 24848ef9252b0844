package discord

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/bwmarrin/discordgo"

	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/sessionkey"
	"github.com/agentbot/agentbot/core/transcript"
)

var _ delivery.FilePoster = (*Client)(nil)

// fileRef names an uploaded file in a message body (files[id]).
type fileRef struct {
	ID       int    `json:"id"`
	Filename string `json:"filename"`
}

// fileBody is a live message's create body with files: the body as
// payload_json beside the files[n] parts.
type fileBody struct {
	liveBody
	Attachments []fileRef `json:"attachments"`
}

// PostLiveFiles implements delivery.FilePoster: part 0 of d as PostLive
// posts it (the same nonce, enforced: a repeat within Discord's window
// returns the first message), with d.Files uploaded in the same request
// (multipart/form-data). It returns the files as Discord shows them.
func (c *Client) PostLiveFiles(ctx context.Context, d delivery.Delivery, text string, ctl delivery.Controls) (string, []transcript.Attachment, error) {
	s := c.session()
	channelID, err := c.channelFor(ctx, s, d.Target.ConversationID)
	if err != nil {
		return "", nil, err
	}
	if !strings.HasPrefix(d.Target.ConversationID, sessionkey.DMPrefix) {
		if err := c.checkThread(ctx, s, channelID); err != nil {
			return "", nil, err
		}
	}
	body := fileBody{liveBody: liveBody{Content: text, AllowedMentions: noMentions(), Components: components(ctl), Nonce: nonceFor(d.ID, 0), EnforceNonce: true}}
	if d.ReplyTo != "" {
		f := false
		body.MessageReference = &discordgo.MessageReference{MessageID: d.ReplyTo, ChannelID: channelID, FailIfNotExists: &f}
	}
	files := make([]*discordgo.File, 0, len(d.Files))
	for i, f := range d.Files {
		body.Attachments = append(body.Attachments, fileRef{ID: i, Filename: f.Name})
		files = append(files, &discordgo.File{Name: f.Name, ContentType: f.ContentType, Reader: bytes.NewReader(f.Data)})
	}
	endpoint := discordgo.EndpointChannelMessages(channelID)
	var msg discordgo.Message
	err = c.retry(ctx, func() error {
		// A retry builds the form again: the readers are spent.
		for i, f := range d.Files {
			files[i].Reader = bytes.NewReader(f.Data)
		}
		contentType, form, err := discordgo.MultipartBodyWithJSON(body, files)
		if err != nil {
			return fmt.Errorf("build the form: %w: %w", err, delivery.ErrRejected)
		}
		return c.rawRequest(ctx, s, endpoint, contentType, form, &msg)
	})
	if err != nil {
		return "", nil, fmt.Errorf("post live part 1 with %d file(s) to %s: %w", len(d.Files), channelID, err)
	}
	c.claimed.add(msg.ID)
	return msg.ID, attachmentsOf(&msg), nil
}

// rawRequest POSTs one prepared body to endpoint, waiting out 429s (which
// commit nothing); the caller retries what is retryable.
func (c *Client) rawRequest(ctx context.Context, s *discordgo.Session, endpoint, contentType string, body []byte, out any) error {
	for {
		raw, err := s.RequestRaw("POST", endpoint, contentType, body, endpoint, 0, discordgo.WithContext(ctx), discordgo.WithRetryOnRatelimit(false))
		var rl *discordgo.RateLimitError
		if errors.As(err, &rl) && rl.RateLimit != nil && rl.TooManyRequests != nil {
			c.d.Metrics.RESTError(0, http.StatusTooManyRequests)
			if err := c.waitRateLimit(ctx, rl.RetryAfter, false); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		return json.Unmarshal(raw, out)
	}
}
