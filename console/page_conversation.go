package console

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/core/sessionkey"
	"github.com/agentbot/agentbot/core/transcript"
)

type convView struct {
	Text string // what to show: the id (or "DM with <user>")
	URL  string // discord.com link when the guild is known
}

func conversation(ref binding.ConversationRef, guild string) convView {
	n := ref.Normalize()
	id := n.ConversationID
	if u, ok := strings.CutPrefix(id, sessionkey.DMPrefix); ok {
		return convView{Text: "DM with user " + u}
	}
	id = strings.TrimPrefix(id, "channel:")
	v := convView{Text: id}
	if guild != "" && id != "" {
		v.URL = "https://discord.com/channels/" + url.PathEscape(guild) + "/" + url.PathEscape(id)
	}
	return v
}

type entryRow struct {
	Seq                                     uint64
	Generation                              int
	At, Role, Author, Source, Text, Message string
	DeliveryID, DeliveryState               string
	Bad                                     bool
	// Attachments of a user entry: "name (type, size)".
	Attachments []string
}

type conversationPage struct {
	base
	Key                    string
	Info                   *session.Info
	Bound                  []bindingRow
	Entries                []entryRow
	First, Last            uint64
	Older, Newer, Newest   string
	Deliveries             []deliveryRow
	Undelivered, Delivered int
}

func (c *Console) conversation(r *http.Request) (any, error) {
	ctx := r.Context()
	key := r.PathValue("key")
	if key == "" {
		return nil, notFound("no session key")
	}
	n := 2 * c.o.PageSize
	var from uint64
	if v := r.URL.Query().Get("from"); v != "" {
		f, err := strconv.ParseUint(v, 10, 64)
		if err != nil || f < 1 {
			return nil, badRequest("from %q is not a sequence number (1 or more)", v)
		}
		from = f
	}
	var entries []transcript.Entry
	var err error
	more := false
	if from == 0 {
		entries, err = c.o.Store.Tail(ctx, key, n)
	} else {
		entries, err = c.o.Store.Range(ctx, key, from, n+1)
		if len(entries) > n {
			entries, more = entries[:n], true
		}
	}
	if err != nil {
		return nil, err
	}
	p := conversationPage{base: c.base("sessions", "Conversation "+key), Key: key}
	infos, err := c.o.Store.SessionInfos(ctx)
	if err != nil {
		return nil, err
	}
	for _, in := range infos {
		if in.Key == key {
			p.Info = &in
			break
		}
	}
	recs, err := c.allBindings(ctx)
	if err != nil {
		return nil, err
	}
	now := c.o.Now()
	bindingIDs := map[string]bool{}
	for _, b := range recs {
		if b.TargetSessionKey == key {
			bindingIDs[b.ID] = true
			p.Bound = append(p.Bound, c.bindingRow(b, now))
		}
	}
	if len(entries) == 0 && from == 0 && p.Info == nil && len(p.Bound) == 0 {
		return nil, notFound("session %q has no transcript (session keys look like agent:main:discord:channel:<id>)", key)
	}
	self := sessURL(key)
	if len(entries) > 0 {
		p.First, p.Last = entries[0].Seq, entries[len(entries)-1].Seq
		if p.First > 1 {
			p.Older = query(self, "from", strconv.FormatUint(uint64(max(1, int64(p.First)-int64(n))), 10))
		}
		if more {
			p.Newer = query(self, "from", strconv.FormatUint(p.Last+1, 10))
		}
	}
	if from != 0 {
		p.Newest = self
	}
	// Invariant 17: an entry shows its final text marked "edited"; a deleted
	// one shows "(deleted)" without its text (erased in the store anyway).
	for _, f := range transcript.Fold(entries) {
		e, text := f.Entry, f.Latest
		switch {
		case f.Deleted:
			text = "(deleted)"
		case f.Edited:
			text += " (edited)"
		case e.IsChange():
			text = fmt.Sprintf("(%s of #%d)", e.Source, e.Target)
		}
		row := entryRow{Seq: e.Seq, Generation: e.Generation, At: c.fmtTime(e.At), Role: string(e.Role), Author: e.Author,
			Source: string(e.Source), Text: text, Message: strings.Join(e.MessageIDs, ", "), DeliveryID: e.DeliveryID}
		for _, a := range e.Attachments {
			row.Attachments = append(row.Attachments, fmt.Sprintf("%s (%s, %d bytes)", a.Filename, a.ContentType, a.Size))
		}
		if e.DeliveryID != "" {
			d, ok, err := c.o.Store.GetDelivery(ctx, e.DeliveryID)
			if err != nil {
				return nil, err
			}
			if ok {
				row.DeliveryState = string(d.State)
				row.Bad = d.State != delivery.StateDelivered && d.State != delivery.StateSkipped
			}
		}
		p.Entries = append(p.Entries, row)
	}
	// What was sent (or tried) to this session's chat: newest deliveries,
	// plus older failed and unfinished ones so they are not missed.
	agent := sessionkey.Agent(key)
	match := func(d delivery.Record) bool {
		if d.SessionKey == key || (d.Delivery.BindingID != "" && bindingIDs[d.Delivery.BindingID]) {
			return true
		}
		return agent != "" && d.Delivery.Target.Valid() && sessionkey.ForConversation(agent, d.Delivery.Target) == key
	}
	seen := map[string]bool{}
	var found []delivery.Record
	for _, q := range []struct {
		s delivery.PendingState
		n int
	}{{"", sessionScanCap}, {delivery.StateFailed, stateScanCap}, {delivery.StatePending, stateScanCap}, {delivery.StateSent, stateScanCap}} {
		ds, err := c.o.Store.Deliveries(ctx, q.s, q.n)
		if err != nil {
			return nil, err
		}
		for _, d := range ds {
			if !seen[d.Delivery.ID] && match(d) {
				seen[d.Delivery.ID] = true
				found = append(found, d)
			}
		}
	}
	slices.SortFunc(found, func(a, b delivery.Record) int { return b.CreatedAt.Compare(a.CreatedAt) })
	for _, d := range found {
		row := c.deliveryRow(d)
		if row.Bad {
			p.Undelivered++
		} else {
			p.Delivered++
		}
		if len(p.Deliveries) < conversationCap {
			p.Deliveries = append(p.Deliveries, row)
		}
	}
	return p, nil
}
