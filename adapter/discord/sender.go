package discord

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/sessionkey"
)

// noMentions is sent with every message and edit: nothing pings (invariant 12).
func noMentions() *discordgo.MessageAllowedMentions {
	return &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}}
}

// messageCreate is the body of POST /channels/{id}/messages. discordgo's
// MessageSend has no nonce fields, so the adapter sends its own body.
type messageCreate struct {
	Content          string                            `json:"content"`
	AllowedMentions  *discordgo.MessageAllowedMentions `json:"allowed_mentions"`
	MessageReference *discordgo.MessageReference       `json:"message_reference,omitempty"`
	Nonce            string                            `json:"nonce"`
	EnforceNonce     bool                              `json:"enforce_nonce"`
}

// nonceFor derives the message nonce of part i of a delivery: the same
// logical send always carries the same nonce, so Discord returns the first
// message instead of posting a duplicate (at most 25 characters).
func nonceFor(deliveryID string, part int) string {
	sum := sha256.Sum256([]byte(deliveryID + "\x00" + strconv.Itoa(part)))
	return base64.RawURLEncoding.EncodeToString(sum[:])[:25]
}

// Send implements delivery.Sender: it posts d (split into parts of at most
// 2000 characters), retries only retryable failures, and returns every
// message id as the receipt.
func (a *Adapter) Send(ctx context.Context, d delivery.Delivery) (delivery.Receipt, error) {
	s := a.session()
	if s == nil {
		return delivery.Receipt{}, fmt.Errorf("%w: not connected to Discord", delivery.ErrTransient)
	}
	parts := SplitMessage(d.Text, MaxMessageLen)
	if d.Interaction != nil {
		ids, err := a.sendInteraction(ctx, s, d, parts)
		if err == nil {
			return delivery.Receipt{MessageIDs: ids}, nil
		}
		a.log.Warn().Err(err).Str("delivery", d.ID).Msg("interaction reply failed; posting as a message")
	}
	channelID, err := a.channelFor(ctx, s, d.Target.ConversationID)
	if err != nil {
		return delivery.Receipt{}, err
	}
	if !strings.HasPrefix(d.Target.ConversationID, sessionkey.DMPrefix) {
		// A thread that was archived or locked cannot take a message,
		// bound or not (an intro, a farewell, a notice): posting would
		// unarchive it or fail. Fail closed.
		if err := a.checkThread(ctx, s, channelID); err != nil {
			return delivery.Receipt{}, err
		}
	}
	if d.ViaWebhook {
		if parent := a.parentOf(ctx, s, channelID); parent != "" {
			ids, err := a.hooks.send(ctx, s, parent, channelID, d, parts)
			if err == nil {
				a.touch(d)
				return delivery.Receipt{MessageIDs: ids}, nil
			}
			if !errors.Is(err, errWebhookUnusable) {
				return delivery.Receipt{}, err
			}
			a.log.Warn().Err(err).Str("delivery", d.ID).Str("channel", channelID).Msg("webhook unusable: posting as the bot instead")
		}
	}
	ids, err := a.botSend(ctx, s, channelID, d, parts)
	if err != nil {
		return delivery.Receipt{}, err
	}
	a.touch(d)
	return delivery.Receipt{MessageIDs: ids}, nil
}

// touch records outbound activity on the binding a send went to.
func (a *Adapter) touch(d delivery.Delivery) {
	if d.BindingID != "" {
		a.d.Bindings.Touch(d.BindingID, a.d.Clock.Now())
	}
}

func (a *Adapter) botSend(ctx context.Context, s *discordgo.Session, channelID string, d delivery.Delivery, parts []string) ([]string, error) {
	ids := make([]string, 0, len(parts))
	endpoint := discordgo.EndpointChannelMessages(channelID)
	for i, part := range parts {
		body := messageCreate{Content: part, AllowedMentions: noMentions(), Nonce: nonceFor(d.ID, i), EnforceNonce: true}
		if i == 0 && d.ReplyTo != "" {
			f := false
			body.MessageReference = &discordgo.MessageReference{MessageID: d.ReplyTo, ChannelID: channelID, FailIfNotExists: &f}
		}
		var msg discordgo.Message
		err := a.retry(ctx, func() error {
			raw, err := s.RequestWithBucketID("POST", endpoint, body, endpoint, discordgo.WithContext(ctx))
			if err != nil {
				return err
			}
			return json.Unmarshal(raw, &msg)
		})
		if err != nil {
			return ids, fmt.Errorf("send part %d/%d to %s: %w", i+1, len(parts), channelID, err)
		}
		ids = append(ids, msg.ID)
	}
	return ids, nil
}

func (a *Adapter) sendInteraction(ctx context.Context, s *discordgo.Session, d delivery.Delivery, parts []string) ([]string, error) {
	_, appID := a.ids()
	in := &discordgo.Interaction{ID: d.Interaction.ID, Token: d.Interaction.Token, AppID: appID}
	if d.Resend {
		// A previous process may have answered already: reuse that answer.
		if orig, err := s.InteractionResponse(in, discordgo.WithContext(ctx)); err == nil && orig.ID != "" {
			return []string{orig.ID}, nil
		}
	}
	err := s.InteractionRespond(in, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseChannelMessageWithSource,
		Data: &discordgo.InteractionResponseData{Content: parts[0], AllowedMentions: noMentions()}}, discordgo.WithContext(ctx))
	if err != nil {
		a.countError(err)
		return nil, classify(err)
	}
	orig, err := s.InteractionResponse(in, discordgo.WithContext(ctx))
	if err != nil {
		a.countError(err)
		return nil, classify(err)
	}
	ids := []string{orig.ID}
	for _, part := range parts[1:] {
		m, err := s.FollowupMessageCreate(in, true, &discordgo.WebhookParams{Content: part, AllowedMentions: noMentions()}, discordgo.WithContext(ctx))
		if err != nil {
			a.countError(err)
			return ids, classify(err)
		}
		ids = append(ids, m.ID)
	}
	return ids, nil
}

// channelFor resolves a conversation id to a Discord channel id; a DM
// ("user:<id>") opens (or reuses) the DM channel.
func (a *Adapter) channelFor(ctx context.Context, s *discordgo.Session, conv string) (string, error) {
	user, ok := strings.CutPrefix(conv, sessionkey.DMPrefix)
	if !ok {
		return strings.TrimPrefix(conv, "channel:"), nil
	}
	if id, ok := a.dms.Load(user); ok {
		return id.(string), nil
	}
	var ch *discordgo.Channel
	err := a.retry(ctx, func() error {
		var err error
		ch, err = s.UserChannelCreate(user, discordgo.WithContext(ctx))
		return err
	})
	if err != nil {
		return "", fmt.Errorf("open DM with %s: %w", user, err)
	}
	a.dms.Store(user, ch.ID)
	return ch.ID, nil
}

// channel returns a channel from the gateway state, else from REST.
func (a *Adapter) channel(ctx context.Context, s *discordgo.Session, id string) (*discordgo.Channel, error) {
	if ch, ok := stateChannel(s, id); ok {
		return ch, nil
	}
	var ch *discordgo.Channel
	err := a.retry(ctx, func() error {
		var err error
		ch, err = s.Channel(id, discordgo.WithContext(ctx))
		return err
	})
	return ch, err
}

// stateChannel copies a channel out of the gateway state under the state's
// lock: discordgo updates cached channels in place.
func stateChannel(s *discordgo.Session, id string) (*discordgo.Channel, bool) {
	ch, err := s.State.Channel(id)
	if err != nil {
		return nil, false
	}
	s.State.RLock()
	defer s.State.RUnlock()
	c := *ch
	if ch.ThreadMetadata != nil {
		md := *ch.ThreadMetadata
		c.ThreadMetadata = &md
	}
	return &c, true
}

// checkThread fails with ErrDestinationGone when a thread is archived or locked.
func (a *Adapter) checkThread(ctx context.Context, s *discordgo.Session, id string) error {
	ch, err := a.channel(ctx, s, id)
	if err != nil {
		return fmt.Errorf("check thread %s: %w", id, err)
	}
	if ch.IsThread() && ch.ThreadMetadata != nil {
		switch {
		case ch.ThreadMetadata.Locked:
			return fmt.Errorf("thread %s is locked: %w", id, delivery.ErrDestinationGone)
		case ch.ThreadMetadata.Archived:
			return fmt.Errorf("thread %s is archived: %w", id, delivery.ErrDestinationGone)
		}
	}
	return nil
}

// parentOf returns a thread's parent channel, or "" for a non-thread.
func (a *Adapter) parentOf(ctx context.Context, s *discordgo.Session, id string) string {
	ch, err := a.channel(ctx, s, id)
	if err != nil || !ch.IsThread() {
		return ""
	}
	return ch.ParentID
}

// retryAttempts bounds attempts at one REST call. Bot sends carry a nonce
// and webhook sends are reconciled, so every retry is safe; five attempts
// (backoff 1, 2, 4, 8 × RetryBackoff) ride out a short Discord hiccup.
const retryAttempts = 5

// retry runs call, retrying retryable failures (5xx, network; discordgo
// itself waits out 429s) with backoff. The returned error is classified
// (see classify).
func (a *Adapter) retry(ctx context.Context, call func() error) error {
	var err error
	for attempt := 0; attempt < retryAttempts; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return classify(ctx.Err())
			case <-time.After(a.opt.RetryBackoff << (attempt - 1)):
			}
		}
		raw := call()
		if raw == nil {
			return nil
		}
		a.countError(raw)
		err = classify(raw)
		if !retryable(err) {
			return err
		}
	}
	return err
}

func (a *Adapter) countError(err error) {
	if code, status, ok := restCode(err); ok {
		a.d.Metrics.RESTError(code, status)
	}
}
