package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/bwmarrin/discordgo"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/command"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/sessionkey"
)

// stopPrefix starts the custom id of a live message's Stop button; the
// rest is the run id (core/session Run.ID).
const stopPrefix = "agentbot:stop:"

// liveBody is a live message's create or edit body. Components is always
// sent on an edit: [] removes the Stop button.
type liveBody struct {
	Content          string                            `json:"content"`
	AllowedMentions  *discordgo.MessageAllowedMentions `json:"allowed_mentions"`
	Components       []discordgo.MessageComponent      `json:"components"`
	MessageReference *discordgo.MessageReference       `json:"message_reference,omitempty"`
	Nonce            string                            `json:"nonce,omitempty"`
	EnforceNonce     bool                              `json:"enforce_nonce,omitempty"`
}

// components lays a live message's controls out: the Stop button first,
// then the other buttons, in rows of five. More than Discord displays (5
// rows) is sent as is, and refused by Discord as an invalid form body.
func components(c delivery.Controls) []discordgo.MessageComponent {
	var buttons []discordgo.MessageComponent
	if c.StopRun != "" {
		buttons = append(buttons, discordgo.Button{Label: "Stop", Style: discordgo.SecondaryButton, CustomID: stopPrefix + c.StopRun, Emoji: &discordgo.ComponentEmoji{Name: "⏹️"}})
	}
	for _, b := range c.Buttons {
		buttons = append(buttons, discordgo.Button{CustomID: b.CustomID, Label: b.Label, Style: buttonStyle(b.Style)})
	}
	rows := []discordgo.MessageComponent{}
	for len(buttons) > 0 {
		n := min(5, len(buttons))
		rows = append(rows, discordgo.ActionsRow{Components: buttons[:n]})
		buttons = buttons[n:]
	}
	return rows
}

func buttonStyle(s delivery.ButtonStyle) discordgo.ButtonStyle {
	switch s {
	case delivery.ButtonSecondary:
		return discordgo.SecondaryButton
	case delivery.ButtonSuccess:
		return discordgo.SuccessButton
	case delivery.ButtonDanger:
		return discordgo.DangerButton
	}
	return discordgo.PrimaryButton
}

// SplitLive implements delivery.LiveSender with the reply splitter.
func (c *Client) SplitLive(text string) []string { return SplitMessage(text, MaxMessageLen) }

// PostLive implements delivery.LiveSender: a bot message carrying the
// part's nonce (a repeat returns the first message), nothing pinged, the
// first part replying to d.ReplyTo.
func (c *Client) PostLive(ctx context.Context, d delivery.Delivery, part int, text string, ctl delivery.Controls) (string, error) {
	s := c.session()
	channelID, err := c.channelFor(ctx, s, d.Target.ConversationID)
	if err != nil {
		return "", err
	}
	if part == 0 && !strings.HasPrefix(d.Target.ConversationID, sessionkey.DMPrefix) {
		if err := c.checkThread(ctx, s, channelID); err != nil {
			return "", err
		}
	}
	body := liveBody{Content: text, AllowedMentions: noMentions(), Components: components(ctl), Nonce: nonceFor(d.ID, part), EnforceNonce: true}
	if part == 0 && d.ReplyTo != "" {
		f := false
		body.MessageReference = &discordgo.MessageReference{MessageID: d.ReplyTo, ChannelID: channelID, FailIfNotExists: &f}
	}
	endpoint := discordgo.EndpointChannelMessages(channelID)
	var msg discordgo.Message
	if err := c.liveRequest(ctx, s, "POST", endpoint, endpoint, body, &msg); err != nil {
		return "", fmt.Errorf("post live part %d to %s: %w", part+1, channelID, err)
	}
	c.claimed.add(msg.ID)
	return msg.ID, nil
}

// EditLive implements delivery.LiveSender: the edit carries the same
// allowed_mentions (nothing pings on an edit either) and the controls.
func (c *Client) EditLive(ctx context.Context, d delivery.Delivery, messageID, text string, ctl delivery.Controls) error {
	s := c.session()
	channelID, err := c.channelFor(ctx, s, d.Target.ConversationID)
	if err != nil {
		return err
	}
	endpoint := discordgo.EndpointChannelMessage(channelID, messageID)
	// One bucket per channel for edits (Discord's shared message-edit limit).
	bucket := discordgo.EndpointChannelMessage(channelID, "")
	body := liveBody{Content: text, AllowedMentions: noMentions(), Components: components(ctl)}
	if err := c.liveRequest(ctx, s, "PATCH", endpoint, bucket, body, nil); err != nil {
		return fmt.Errorf("edit live message %s: %w", messageID, err)
	}
	return nil
}

// liveRequest sends one REST call, waiting out 429s (which commit nothing)
// and retrying what is retryable.
func (c *Client) liveRequest(ctx context.Context, s *discordgo.Session, method, endpoint, bucket string, body any, out any) error {
	return c.retry(ctx, func() error {
		for {
			raw, err := s.RequestWithBucketID(method, endpoint, body, bucket, discordgo.WithContext(ctx), discordgo.WithRetryOnRatelimit(false))
			var rl *discordgo.RateLimitError
			if errors.As(err, &rl) && rl.RateLimit != nil && rl.TooManyRequests != nil {
				c.d.Metrics.RESTError(0, http.StatusTooManyRequests)
				if err := c.waitRateLimit(ctx, rl.RetryAfter, false); err != nil {
					return err
				}
				continue
			}
			if err != nil || out == nil {
				return err
			}
			return json.Unmarshal(raw, out)
		}
	})
}

// onComponent answers a button click at once (Discord's 3 s): the Stop
// button of a live message stops its run (the same rule as /stop: the
// run's owner or an operator; stopClick) and answers ephemerally; an ACP
// permission choice (acp.Manager.Choose: the binder or an operator) is
// acknowledged as a deferred update, the manager editing the message to
// show it. A refusal is ephemeral (the clicker only).
func (g *Gateway) onComponent(ctx context.Context, in *discordgo.Interaction) {
	data := in.MessageComponentData()
	var userID string
	switch {
	case in.Member != nil && in.Member.User != nil:
		userID = in.Member.User.ID
		g.c.noteMember(g.c.session(), in.GuildID, in.Member, in.Member.User)
	case in.User != nil:
		userID = in.User.ID
	}
	conv := g.conversationOf(in.GuildID, in.ChannelID, userID)
	ephemeral := func(text string) *discordgo.InteractionResponse {
		return &discordgo.InteractionResponse{Type: discordgo.InteractionResponseChannelMessageWithSource,
			Data: &discordgo.InteractionResponseData{Content: truncateRunes(text, MaxMessageLen), Flags: discordgo.MessageFlagsEphemeral, AllowedMentions: noMentions()}}
	}
	var resp *discordgo.InteractionResponse
	if idText, ok := strings.CutPrefix(data.CustomID, stopPrefix); ok {
		resp = ephemeral(g.stopClick(ctx, conv, userID, idText))
	} else {
		refusal := "This button is no longer active."
		if g.d.ACP != nil && delivery.IsPermissionButton(data.CustomID) {
			refusal = g.d.ACP.Choose(ctx, data.CustomID, userID, conv)
		}
		resp = &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredMessageUpdate}
		if refusal != "" {
			resp = ephemeral("⚠️ " + refusal)
		}
	}
	s := g.c.session()
	if err := s.InteractionRespond(in, resp, discordgo.WithContext(ctx)); err != nil {
		g.c.countError(err)
		g.log.Warn().Err(restError(err)).Str("customId", data.CustomID).Msg("button answer failed")
	}
}

// stopClick stops the run a Stop button names, if the clicker may, and
// returns the ephemeral answer.
func (g *Gateway) stopClick(ctx context.Context, conv binding.ConversationRef, userID, idText string) string {
	id, err := strconv.ParseUint(idText, 10, 64)
	if err != nil {
		return "ℹ️ This button is not a Stop button I know."
	}
	key, _, _ := g.d.Outbound.SessionFor(conv)
	run, ok := g.d.Sessions.Running(key)
	if !ok || run.ID != id {
		return "ℹ️ It had already finished."
	}
	if err := g.d.Authority.MayStop(ctx, authz.Actor{UserID: userID, Where: conv}, run.Owner, conv, "this reply"); err != nil {
		return "⚠️ " + command.Refusal(err)
	}
	if !g.d.Sessions.Stop(run) {
		return "ℹ️ It had already finished."
	}
	return "⏹️ Stopped."
}
