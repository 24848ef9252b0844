package discord

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
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
// message id as the receipt. A resend (d.Shown) resumes after the parts an
// earlier attempt confirmed. When a later part fails, the receipt still
// lists the parts displayed and their text, with the error.
func (c *Client) Send(ctx context.Context, d delivery.Delivery) (delivery.Receipt, error) {
	r, err := c.send(ctx, d)
	c.claimed.add(r.MessageIDs...)
	return r, err
}

// claimedIDs remembers the message ids recent sends confirmed: each
// belongs to its delivery, so reconciliation never takes one for another
// delivery's (an identical text said a moment before).
type claimedIDs struct {
	mu   sync.Mutex
	set  map[string]struct{}
	ring []string
	next int
}

// claimedCap bounds how many confirmed ids are remembered.
const claimedCap = 8192

func (c *claimedIDs) add(ids ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.set == nil {
		c.set, c.ring = map[string]struct{}{}, make([]string, claimedCap)
	}
	for _, id := range ids {
		if _, ok := c.set[id]; ok || id == "" {
			continue
		}
		if old := c.ring[c.next]; old != "" {
			delete(c.set, old)
		}
		c.ring[c.next] = id
		c.next = (c.next + 1) % claimedCap
		c.set[id] = struct{}{}
	}
}

func (c *claimedIDs) has(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.set[id]
	return ok
}

func (c *Client) send(ctx context.Context, d delivery.Delivery) (delivery.Receipt, error) {
	s := c.session()
	parts := SplitMessage(d.Text, MaxMessageLen)
	if len(d.Shown) > len(parts) {
		d.Shown = d.Shown[:len(parts)]
	}
	reconcile := false
	if d.Interaction != nil {
		ids, err := c.sendInteraction(ctx, s, d, parts)
		var gone *interactionGone
		switch {
		case err == nil:
			return delivery.Receipt{MessageIDs: ids}, nil
		case !errors.As(err, &gone):
			return shownReceipt(ids, parts, err)
		}
		// The interaction can take no more (never answered within 3 s, or
		// its token expired): the rest is posted as channel messages. When
		// an earlier attempt may have displayed the next part, the channel
		// is read for it first.
		c.log.Warn().Err(gone.err).Str("delivery", d.ID).Int("parts_shown", len(ids)).
			Msg("interaction cannot take the reply: posting the rest as messages")
		d.Shown, reconcile = ids, gone.unsure
	}
	channelID, err := c.channelFor(ctx, s, d.Target.ConversationID)
	if err != nil {
		return shownReceipt(d.Shown, parts, err)
	}
	if !strings.HasPrefix(d.Target.ConversationID, sessionkey.DMPrefix) {
		// A thread that was archived or locked cannot take a message,
		// bound or not (an intro, a farewell, a notice): posting would
		// unarchive it or fail. Fail closed.
		if err := c.checkThread(ctx, s, channelID); err != nil {
			return shownReceipt(d.Shown, parts, err)
		}
	}
	if d.ViaWebhook {
		if parent := c.parentOf(ctx, s, channelID); parent != "" {
			ids, err := c.hooks.send(ctx, s, parent, channelID, d, parts)
			if err == nil {
				return delivery.Receipt{MessageIDs: ids}, nil
			}
			if !errors.Is(err, errWebhookUnusable) {
				return shownReceipt(ids, parts, err)
			}
			c.log.Warn().Err(err).Str("delivery", d.ID).Str("channel", channelID).Msg("webhook unusable: posting as the bot instead")
			// Parts the webhook displayed stay; the rest is posted by the bot.
			d.Shown = ids
		}
	}
	ids, err := c.botSend(ctx, s, channelID, d, parts, reconcile)
	if err != nil {
		return shownReceipt(ids, parts, err)
	}
	return delivery.Receipt{MessageIDs: ids}, nil
}

// shownReceipt is the receipt of a send that failed after ids (the first
// len(ids) parts) were displayed: Outbound records exactly those.
func shownReceipt(ids, parts []string, err error) (delivery.Receipt, error) {
	if len(ids) == 0 {
		return delivery.Receipt{}, err
	}
	return delivery.Receipt{MessageIDs: slices.Clone(ids), Text: strings.Join(parts[:len(ids)], "")}, err
}

// A resend (an earlier attempt, maybe of a process killed in the instant
// Discord accepted its post, may have displayed it) always reads the
// channel for what the delivery could have created before posting
// (invariant 4): Discord honours enforce_nonce for an unspecified few
// minutes, and a resend trusting the nonce alone for a fixed while after
// the first attempt posted again once the platform had forgotten it (a
// restart 3 s later against a 2 s window: issue 27.10). The nonce stays on
// every post, guarding the sender's own retries.

func (c *Client) botSend(ctx context.Context, s *discordgo.Session, channelID string, d delivery.Delivery, parts []string, reconcile bool) ([]string, error) {
	ids := make([]string, 0, len(parts))
	ids = append(ids, d.Shown...)
	botID, _ := c.ids()
	if len(ids) < len(parts) && (reconcile || d.Resend) {
		found, err := c.reconcile(ctx, s, channelID, d.FirstAttempt, parts, ids, func(m *discordgo.Message) bool {
			return m.Author != nil && m.Author.ID == botID
		})
		if err != nil {
			return ids, err
		}
		if len(found) > len(ids) {
			c.log.Info().Str("delivery", d.ID).Int("parts", len(found)-len(ids)).Msg("resend found parts already displayed")
		}
		ids = found
	}
	endpoint := discordgo.EndpointChannelMessages(channelID)
	// Until something of this delivery is (or may be) displayed, waiting out
	// a 429 releases the conversation's send lock: other deliveries to it
	// go first and the display order still equals the transcript order.
	untouched := !d.Resend && len(ids) == 0
	for i := len(ids); i < len(parts); i++ {
		body := messageCreate{Content: parts[i], AllowedMentions: noMentions(), Nonce: nonceFor(d.ID, i), EnforceNonce: true}
		if i == 0 && d.ReplyTo != "" {
			f := false
			body.MessageReference = &discordgo.MessageReference{MessageID: d.ReplyTo, ChannelID: channelID, FailIfNotExists: &f}
		}
		var msg discordgo.Message
		err := c.retry(ctx, func() error {
			for {
				raw, err := s.RequestWithBucketID("POST", endpoint, body, endpoint, discordgo.WithContext(ctx), discordgo.WithRetryOnRatelimit(false))
				var rl *discordgo.RateLimitError
				if errors.As(err, &rl) && rl.RateLimit != nil && rl.TooManyRequests != nil {
					// A 429 committed nothing: wait it out and send again.
					c.d.Metrics.RESTError(0, http.StatusTooManyRequests)
					if err := c.waitRateLimit(ctx, rl.RetryAfter, untouched); err != nil {
						return err
					}
					continue
				}
				if err != nil {
					untouched = false // a failed create may have been committed
					return err
				}
				return json.Unmarshal(raw, &msg)
			}
		})
		if err != nil {
			return ids, fmt.Errorf("send part %d/%d to %s: %w", i+1, len(parts), channelID, err)
		}
		ids = append(ids, msg.ID)
		untouched = false
	}
	return ids, nil
}

// waitRateLimit waits out a 429's retry_after; with unlocked, the
// conversation's send lock is released meanwhile (delivery.Pause).
func (c *Client) waitRateLimit(ctx context.Context, d time.Duration, unlocked bool) error {
	if d <= 0 {
		d = time.Second
	}
	if unlocked {
		return delivery.Pause(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// reconcileSkew is how far Discord's clock may be behind the bot's when a
// resend looks for messages created since the delivery's first attempt.
const reconcileSkew = 10 * time.Second

// reconcilePages bounds how many pages of 100 messages a reconciliation reads.
const reconcilePages = 10

// reconcile reads the channel for the parts after ids that this delivery
// could have created: messages by the same author (mine), with exactly the
// part's content, created after the delivery's first attempt (a snowflake
// lower bound) and after the parts already known, in order, and not
// confirmed for another delivery by this process. It returns ids
// extended by what it found. A failed read is an error (retried later)
// rather than a guess; a channel whose history the bot may not read is
// taken as holding none of them.
func (c *Client) reconcile(ctx context.Context, s *discordgo.Session, channelID string, since time.Time, parts, ids []string, mine func(*discordgo.Message) bool) ([]string, error) {
	after := snowflakeAt(since.Add(-reconcileSkew))
	if len(ids) > 0 && compareIDs(ids[len(ids)-1], after) > 0 {
		after = ids[len(ids)-1]
	}
	// Newest first, back to the lower bound: the messages a delivery made
	// are among the latest; older ones cannot be its.
	var msgs []*discordgo.Message
	before := ""
	for page := 0; page < reconcilePages; page++ {
		var batch []*discordgo.Message
		err := c.retry(ctx, func() error {
			var err error
			batch, err = s.ChannelMessages(channelID, 100, before, "", "", discordgo.WithContext(ctx))
			return err
		})
		if err != nil {
			if errors.Is(err, delivery.ErrForbidden) {
				c.log.Warn().Err(err).Str("channel", channelID).Msg("reconcile: cannot read the channel; assuming nothing was displayed")
				break
			}
			return ids, fmt.Errorf("reconcile %s: %w", channelID, err)
		}
		done := len(batch) < 100
		for _, m := range batch {
			if compareIDs(m.ID, after) > 0 {
				msgs = append(msgs, m)
			} else {
				done = true
			}
			if before == "" || compareIDs(m.ID, before) < 0 {
				before = m.ID
			}
		}
		if done {
			break
		}
	}
	slices.SortFunc(msgs, func(x, y *discordgo.Message) int { return compareIDs(x.ID, y.ID) })
	return matchParts(msgs, parts, ids, func(m *discordgo.Message) bool { return !c.claimed.has(m.ID) && mine(m) }), nil
}

// matchParts extends ids with the messages (ascending) that display the
// next parts, in order, each after the previous one.
func matchParts(msgs []*discordgo.Message, parts, ids []string, mine func(*discordgo.Message) bool) []string {
	out := slices.Clone(ids)
	last := ""
	if len(out) > 0 {
		last = out[len(out)-1]
	}
	j := 0
	for i := len(out); i < len(parts); i++ {
		found := ""
		for ; j < len(msgs) && found == ""; j++ {
			m := msgs[j]
			if (last == "" || compareIDs(last, m.ID) < 0) && m.Content == parts[i] && mine(m) {
				found = m.ID
			}
		}
		if found == "" {
			break
		}
		out = append(out, found)
		last = found
	}
	return out
}

// snowflakeAt is the smallest snowflake of a message created at t.
func snowflakeAt(t time.Time) string {
	ms := max(t.UnixMilli()-discordEpochMS, 0)
	return strconv.FormatInt(ms<<22, 10)
}

// discordEpochMS is the Discord snowflake epoch in Unix milliseconds.
const discordEpochMS = 1420070400000

// interactionGone: the interaction can take no more of the reply (not
// answered within Discord's 3 s, or its 15-minute token expired). unsure
// is set when an earlier attempt may have displayed the next part.
type interactionGone struct {
	unsure bool
	err    error
}

func (e *interactionGone) Error() string { return "interaction unusable: " + e.err.Error() }
func (e *interactionGone) Unwrap() error { return e.err }

// sendInteraction answers a slash command with parts[0] and posts the rest
// as followups. A reply whose outcome is unknown (dropped response, failed
// GET @original) is reconciled through GET @original, never posted twice
// (invariant 15). It returns *interactionGone (with the ids shown) only
// when the interaction cannot take the next part.
func (c *Client) sendInteraction(ctx context.Context, s *discordgo.Session, d delivery.Delivery, parts []string) ([]string, error) {
	_, appID := c.ids()
	in := &discordgo.Interaction{ID: d.Interaction.ID, Token: d.Interaction.Token, AppID: appID}
	ids := slices.Clone(d.Shown)
	unsure := d.Resend
	// A deferred interaction (an ephemeral "thinking" placeholder) takes
	// the public reply as followups: each is a new message, displayed where
	// it is created, so the transcript order is the display order.
	if !d.Interaction.Deferred && (len(ids) == 0 || d.Resend) {
		// A previous attempt may have answered already: reuse that answer.
		var orig *discordgo.Message
		known := true
		if d.Resend || len(ids) > 0 {
			var err error
			orig, known, err = c.original(ctx, s, in)
			if err != nil {
				return nil, err
			}
		}
		switch {
		case orig != nil && (len(ids) == 0 || ids[0] == orig.ID):
			if len(ids) == 0 {
				ids = []string{orig.ID}
			}
		case len(ids) > 0:
			// The parts shown were posted as channel messages, or the
			// token expired: the rest goes to the channel.
			return ids, &interactionGone{unsure: true, err: errors.New("earlier parts are not the interaction's")}
		case !known:
			return nil, &interactionGone{unsure: true, err: errors.New("interaction token expired; outcome unknown")}
		default:
			id, err := c.respond(ctx, s, in, parts[0], &unsure)
			if err != nil {
				return nil, err
			}
			ids = []string{id}
		}
	}
	for i := len(ids); i < len(parts); i++ {
		attempts := 0
		maybeShown := unsure
		var m *discordgo.Message
		err := c.retry(ctx, func() error {
			attempts++
			if attempts > 1 || unsure {
				// Followups carry no nonce: look before posting again.
				chID, err := c.channelFor(ctx, s, d.Target.ConversationID)
				if err != nil {
					return err
				}
				found, err := c.reconcile(ctx, s, chID, d.FirstAttempt, parts[:i+1], ids, func(m *discordgo.Message) bool {
					return m.WebhookID == appID
				})
				if err != nil {
					return err
				}
				if len(found) > i {
					m = &discordgo.Message{ID: found[i]}
					return nil
				}
			}
			var err error
			m, err = s.FollowupMessageCreate(in, true, &discordgo.WebhookParams{Content: parts[i], AllowedMentions: noMentions()}, discordgo.WithContext(ctx))
			return err
		})
		unsure = false
		if err != nil {
			if code, _, _ := restCode(err); code == codeInvalidWebhook || code == codeUnknownWebhook {
				return ids, &interactionGone{unsure: maybeShown || attempts > 1, err: err}
			}
			return ids, fmt.Errorf("interaction followup %d/%d: %w", i+1, len(parts), err)
		}
		ids = append(ids, m.ID)
	}
	return ids, nil
}

// original reads the interaction's @original response: (nil, true) when
// there is none yet, (nil, false) when the token no longer works.
func (c *Client) original(ctx context.Context, s *discordgo.Session, in *discordgo.Interaction) (*discordgo.Message, bool, error) {
	var orig *discordgo.Message
	err := c.retry(ctx, func() error {
		var err error
		orig, err = s.InteractionResponse(in, discordgo.WithContext(ctx))
		return err
	})
	if err == nil && orig != nil && orig.ID != "" {
		return orig, true, nil
	}
	code, _, _ := restCode(err)
	switch code {
	case codeUnknownMessage:
		return nil, true, nil
	case codeInvalidWebhook, codeUnknownWebhook, codeUnknownInteraction:
		return nil, false, nil
	}
	if err == nil {
		err = fmt.Errorf("%w: empty @original", delivery.ErrTransient)
	}
	return nil, false, fmt.Errorf("read interaction response: %w", err)
}

// respond posts the interaction callback. An ambiguous failure is checked
// through GET @original before any retry: the answer may be displayed.
func (c *Client) respond(ctx context.Context, s *discordgo.Session, in *discordgo.Interaction, content string, unsure *bool) (string, error) {
	resp := &discordgo.InteractionResponse{Type: discordgo.InteractionResponseChannelMessageWithSource,
		Data: &discordgo.InteractionResponseData{Content: content, AllowedMentions: noMentions()}}
	for attempt := 0; attempt < retryAttempts; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return "", classify(ctx.Err())
			case <-time.After(c.opt.RetryBackoff << (attempt - 1)):
			}
		}
		err := s.InteractionRespond(in, resp, discordgo.WithContext(ctx))
		if err != nil {
			c.countError(err)
		}
		code, _, _ := restCode(err)
		switch {
		case err == nil, code == codeAlreadyAcked:
			// Answered (now, or by an attempt whose response was lost).
		case code == codeUnknownInteraction && !*unsure:
			return "", &interactionGone{err: classify(err)}
		case code != codeUnknownInteraction && !retryable(classify(err)):
			return "", fmt.Errorf("answer interaction: %w", classify(err))
		default:
			*unsure = true
		}
		orig, known, gerr := c.original(ctx, s, in)
		switch {
		case gerr != nil:
			// Answered or maybe answered, but no id: stay pending; a
			// resend looks at @original again, never posts a copy.
			return "", gerr
		case orig != nil:
			return orig.ID, nil
		case !known:
			return "", &interactionGone{unsure: true, err: errors.New("interaction token expired; outcome unknown")}
		case err == nil || code == codeAlreadyAcked:
			return "", fmt.Errorf("answer interaction: acknowledged without a message: %w", delivery.ErrTransient)
		case code == codeUnknownInteraction:
			// Nothing displayed, and Discord forgot the interaction.
			return "", &interactionGone{unsure: *unsure, err: classify(err)}
		}
	}
	return "", fmt.Errorf("answer interaction: %w", delivery.ErrTransient)
}

// channelFor resolves a conversation id to a Discord channel id; a DM
// ("user:<id>") opens (or reuses) the DM channel.
func (c *Client) channelFor(ctx context.Context, s *discordgo.Session, conv string) (string, error) {
	user, ok := strings.CutPrefix(conv, sessionkey.DMPrefix)
	if !ok {
		return strings.TrimPrefix(conv, "channel:"), nil
	}
	if id, ok := c.dms.Load(user); ok {
		return id.(string), nil
	}
	var ch *discordgo.Channel
	err := c.retry(ctx, func() error {
		var err error
		ch, err = s.UserChannelCreate(user, discordgo.WithContext(ctx))
		return err
	})
	if err != nil {
		return "", fmt.Errorf("open DM with %s: %w", user, err)
	}
	c.dms.Store(user, ch.ID)
	return ch.ID, nil
}

// channel returns a channel from the gateway state, else from REST.
func (c *Client) channel(ctx context.Context, s *discordgo.Session, id string) (*discordgo.Channel, error) {
	if ch, ok := stateChannel(s, id); ok {
		return ch, nil
	}
	var ch *discordgo.Channel
	err := c.retry(ctx, func() error {
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
func (c *Client) checkThread(ctx context.Context, s *discordgo.Session, id string) error {
	ch, err := c.channel(ctx, s, id)
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
func (c *Client) parentOf(ctx context.Context, s *discordgo.Session, id string) string {
	ch, err := c.channel(ctx, s, id)
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
func (c *Client) retry(ctx context.Context, call func() error) error {
	var err error
	for attempt := 0; attempt < retryAttempts; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return classify(ctx.Err())
			case <-time.After(c.opt.RetryBackoff << (attempt - 1)):
			}
		}
		raw := call()
		if raw == nil {
			return nil
		}
		c.countError(raw)
		err = classify(raw)
		if !retryable(err) {
			return err
		}
	}
	return err
}

func (c *Client) countError(err error) {
	if code, status, ok := restCode(err); ok {
		c.d.Metrics.RESTError(code, status)
	}
}
