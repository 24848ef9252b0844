package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
)

// WebhookName is the name of the one webhook the bot keeps per parent channel.
const WebhookName = "agentbot personas"

// threadArchiveMinutes is the longest auto-archive Discord offers (7 days):
// an archive then almost always means a person archived the thread.
const threadArchiveMinutes = 10080

// threadManager creates subagent threads. It is reused across reconnects
// and token rotations (it reads the session and token at call time).
type threadManager struct {
	c  *Client
	mu sync.Mutex // one create at a time, so reconciliation sees a settled list
}

// CreateThread implements session.Threads: a standalone public thread in
// parent named name. An ambiguous failure (the create may have happened)
// is reconciled by listing active threads before any retry, so a retry
// never makes a second thread.
func (c *Client) CreateThread(ctx context.Context, parent binding.ConversationRef, name string) (binding.ConversationRef, error) {
	return c.threads.create(ctx, parent.ConversationID, name)
}

func (t *threadManager) create(ctx context.Context, parentID, name string) (binding.ConversationRef, error) {
	c := t.c
	s := c.session()
	t.mu.Lock()
	defer t.mu.Unlock()
	parent, err := c.channel(ctx, s, parentID)
	if err != nil {
		return binding.ConversationRef{}, fmt.Errorf("create thread in %s: %w", parentID, err)
	}
	var before map[string]bool
	if parent.GuildID != "" {
		before = t.activeThreadIDs(ctx, s, parent.GuildID, parentID, name)
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return binding.ConversationRef{}, ctx.Err()
			case <-time.After(c.opt.RetryBackoff << (attempt - 1)):
			}
		}
		ch, err := s.ThreadStartComplex(parentID, &discordgo.ThreadStart{Name: name, Type: discordgo.ChannelTypeGuildPublicThread, AutoArchiveDuration: threadArchiveMinutes}, discordgo.WithContext(ctx))
		if err == nil {
			return t.joined(ctx, s, ch.ID, parentID), nil
		}
		c.countError(err)
		lastErr = classify(err)
		if !retryable(lastErr) {
			break
		}
		// Ambiguous: the thread may exist. Look before trying again.
		if parent.GuildID != "" {
			for id := range t.activeThreadIDs(ctx, s, parent.GuildID, parentID, name) {
				if !before[id] {
					c.log.Info().Str("thread", id).Msg("thread create was ambiguous; found the created thread")
					return t.joined(ctx, s, id, parentID), nil
				}
			}
		}
	}
	return binding.ConversationRef{}, fmt.Errorf("create thread in %s: %w", parentID, lastErr)
}

// activeThreadIDs lists the active threads of parent named name.
func (t *threadManager) activeThreadIDs(ctx context.Context, s *discordgo.Session, guildID, parentID, name string) map[string]bool {
	out := map[string]bool{}
	list, err := s.GuildThreadsActive(guildID, discordgo.WithContext(ctx))
	if err != nil {
		t.c.countError(err)
		t.c.log.Warn().Err(err).Msg("list active threads")
		return out
	}
	for _, th := range list.Threads {
		if th.ParentID == parentID && th.Name == name {
			out[th.ID] = true
		}
	}
	return out
}

// joined joins the bot to a thread it is about to bind (best effort) and returns its ref.
func (t *threadManager) joined(ctx context.Context, s *discordgo.Session, threadID, parentID string) binding.ConversationRef {
	if err := s.ThreadJoin(threadID, discordgo.WithContext(ctx)); err != nil {
		t.c.countError(err)
		t.c.log.Warn().Err(err).Str("thread", threadID).Msg("join thread")
	}
	return t.c.ref(threadID, parentID)
}

type webhookCreds struct{ id, token string }

// webhookManager keeps one webhook per parent channel: created on first
// need, persisted, reused across bindings, unbinds and restarts.
type webhookManager struct {
	c     *Client
	mu    sync.Mutex
	cache map[string]webhookCreds // parent channel -> webhook
	own   sync.Map                // webhook id -> struct{}: echo suppression
}

// isOwn reports whether a webhook id is one of the bot's.
func (w *webhookManager) isOwn(id string) bool {
	_, ok := w.own.Load(id)
	return ok
}

func (w *webhookManager) get(ctx context.Context, s *discordgo.Session, parentID string) (webhookCreds, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if c, ok := w.cache[parentID]; ok {
		return c, nil
	}
	if w.c.d.Webhooks != nil {
		id, tok, ok, err := w.c.d.Webhooks.Webhook(ctx, parentID)
		if err != nil {
			return webhookCreds{}, fmt.Errorf("load webhook of %s: %w", parentID, err)
		}
		if ok {
			c := webhookCreds{id, tok}
			w.cache[parentID] = c
			w.own.Store(id, struct{}{})
			return c, nil
		}
	}
	var hook *discordgo.Webhook
	err := w.c.retry(ctx, func() error {
		var err error
		hook, err = s.WebhookCreate(parentID, WebhookName, "", discordgo.WithContext(ctx))
		return err
	})
	if err != nil {
		if errors.Is(err, delivery.ErrForbidden) {
			// No Manage Webhooks: the persona is unavailable, the thread is fine.
			return webhookCreds{}, fmt.Errorf("create webhook in %s: %w: %w", parentID, errWebhookUnusable, err)
		}
		return webhookCreds{}, fmt.Errorf("create webhook in %s: %w", parentID, err)
	}
	c := webhookCreds{hook.ID, hook.Token}
	w.cache[parentID] = c
	w.own.Store(hook.ID, struct{}{})
	if w.c.d.Webhooks != nil {
		if err := w.c.d.Webhooks.PutWebhook(ctx, parentID, hook.ID, hook.Token); err != nil {
			w.c.log.Error().Err(err).Str("channel", parentID).Msg("persist webhook")
		}
	}
	return c, nil
}

func (w *webhookManager) drop(ctx context.Context, parentID string) {
	w.mu.Lock()
	delete(w.cache, parentID)
	w.mu.Unlock()
	if w.c.d.Webhooks != nil {
		if err := w.c.d.Webhooks.DeleteWebhook(ctx, parentID); err != nil {
			w.c.log.Error().Err(err).Str("channel", parentID).Msg("forget webhook")
		}
	}
}

// send posts the parts into thread by the parent's webhook under the
// delivery's persona, resuming after d.Shown. Unknown Webhook drops the
// webhook and recreates it once. Webhooks have no nonce, so a resend, and
// any retry after an ambiguous failure, first reads the thread for the part
// (see find) and keeps one that already landed.
func (w *webhookManager) send(ctx context.Context, s *discordgo.Session, parentID, threadID string, d delivery.Delivery, parts []string) ([]string, error) {
	ids := make([]string, 0, len(parts))
	ids = append(ids, d.Shown...)
	recreated := false
	for i := len(ids); i < len(parts); {
		c, err := w.get(ctx, s, parentID)
		if err != nil {
			return ids, err
		}
		params := &discordgo.WebhookParams{Content: parts[i], Username: d.Persona.Name, AvatarURL: d.Persona.AvatarURL, AllowedMentions: noMentions()}
		var msg *discordgo.Message
		attempts := 0
		err = w.c.retry(ctx, func() error {
			attempts++
			if attempts > 1 || d.Resend {
				id, err := w.find(ctx, s, threadID, c.id, d, parts[:i+1], ids)
				if err != nil {
					return err
				}
				if id != "" {
					msg = &discordgo.Message{ID: id}
					return nil
				}
			}
			// discordgo's WebhookThreadExecute files every webhook under one
			// rate-limit bucket; Discord limits each webhook on its own, so
			// the bucket here is the webhook's, letting webhooks of different
			// channels send in parallel without tripping 429s.
			uri := discordgo.EndpointWebhookToken(c.id, c.token) + "?wait=true&thread_id=" + threadID
			raw, err := s.RequestWithBucketID("POST", uri, params, discordgo.EndpointWebhook(c.id), discordgo.WithContext(ctx))
			if err != nil {
				return err
			}
			msg = &discordgo.Message{}
			return json.Unmarshal(raw, msg)
		})
		if err != nil {
			if errors.Is(err, errWebhookUnusable) && !recreated {
				recreated = true
				w.drop(ctx, parentID)
				continue
			}
			return ids, fmt.Errorf("webhook send part %d/%d to %s: %w", i+1, len(parts), threadID, err)
		}
		ids = append(ids, msg.ID)
		i++
	}
	return ids, nil
}

// find looks in the thread for the message this delivery could have
// created for the last of parts: posted by this webhook under the same
// persona, with exactly that content, created after the delivery's first
// attempt and after the parts already known (ids). An identical earlier
// message (the same text said before) is never taken for it.
func (w *webhookManager) find(ctx context.Context, s *discordgo.Session, threadID, webhookID string, d delivery.Delivery, parts, ids []string) (string, error) {
	found, err := w.c.reconcile(ctx, s, threadID, d.FirstAttempt, parts, ids, func(m *discordgo.Message) bool {
		return m.WebhookID == webhookID && (m.Author == nil || d.Persona.Name == "" || m.Author.Username == d.Persona.Name)
	})
	if err != nil {
		return "", err
	}
	if len(found) == len(parts) {
		return found[len(parts)-1], nil
	}
	return "", nil
}
