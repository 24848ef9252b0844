package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/agentbot/agentbot/core/audit"
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

// messageRow is one message of the conversation as the chat displays it,
// aligned with the transcript entry that holds it and that entry's
// delivery: the promise, row by row.
type messageRow struct {
	// The chat's side; Displayed is false when the chat does not show it
	// (deleted) or was not read (no audit).
	Displayed            bool
	ID, At, Author, Text string
	Attachments          []string
	Edited               bool
	Entry                *entryCell
	SameText             bool   // the entry holds the displayed text (not repeated)
	Diff, Detail         string // the audit's difference; "" when they agree
	DeliveryState        string
	BadDelivery          bool
	OtherKey             string // the session holding it, when not this page's
	entryKey             string
}

// entryCell is the transcript's side of a row.
type entryCell struct {
	Seq                  uint64
	Generation           int
	At, Role, Source     string
	Author, Text         string
	Edited, Deleted      bool
	Attachments          []string
	Messages, DeliveryID string
}

// auditView is the audit's result for the page's conversation.
type auditView struct {
	Conversation string
	At           string
	Compared     int // rows compared
	Differences  []messageRow
	Kinds        string // "2 text, 1 missing"
	Error        string
	Unavailable  bool // the console has no platform reader
}

type conversationPage struct {
	base
	Key                  string
	Info                 *session.Info
	Bound                []bindingRow
	Rows                 []messageRow
	First, Last          uint64
	Older, Newer, Newest string
	Audit                auditView
	// Undelivered are this chat's sends that did not reach it (failed,
	// or not confirmed): they are in no row.
	Undelivered             []deliveryRow
	UndeliveredN, Confirmed int
}

func (c *Console) conversation(r *http.Request) (any, error) {
	ctx := r.Context()
	key := r.PathValue("key")
	if key == "" {
		return nil, notFound("no session key")
	}
	p := conversationPage{base: c.base("sessions", "Conversation "+key), Key: key}
	entries, err := c.transcriptPage(r, &p)
	if err != nil {
		return nil, err
	}
	recs, err := c.sessionHeader(ctx, &p)
	if err != nil {
		return nil, err
	}
	if len(entries) == 0 && r.URL.Query().Get("from") == "" && p.Info == nil && len(p.Bound) == 0 {
		return nil, notFound("session %q has no transcript (session keys look like agent:main:discord:channel:<id>)", key)
	}
	report, ok := c.auditOf(ctx, &p, key, recs, entries)
	p.Rows = c.alignRows(key, entries, report, ok, p.Older == "", p.Newer == "")
	if err := c.deliveryStates(ctx, p.Rows); err != nil {
		return nil, err
	}
	if ok {
		p.Audit.Compared = len(report.Rows)
		for _, d := range report.Differences() {
			p.Audit.Differences = append(p.Audit.Differences, c.reportRow(key, d))
		}
		p.Audit.Kinds = kindCounts(report.Differences())
	}
	return p, c.undelivered(ctx, &p, recs)
}

// transcriptPage reads the page's entries (the newest 2×PageSize, or from
// ?from=) and sets the pager.
func (c *Console) transcriptPage(r *http.Request, p *conversationPage) ([]transcript.Entry, error) {
	ctx, key := r.Context(), p.Key
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
	return entries, nil
}

// sessionHeader fills the session's info and the conversations bound to
// it; it returns those bindings.
func (c *Console) sessionHeader(ctx context.Context, p *conversationPage) ([]binding.Record, error) {
	infos, err := c.o.Store.SessionInfos(ctx)
	if err != nil {
		return nil, err
	}
	for _, in := range infos {
		if in.Key == p.Key {
			p.Info = &in
			break
		}
	}
	all, err := c.allBindings(ctx)
	if err != nil {
		return nil, err
	}
	now := c.o.Now()
	var recs []binding.Record
	for _, b := range all {
		if b.TargetSessionKey == p.Key {
			recs = append(recs, b)
			p.Bound = append(p.Bound, c.bindingRow(b, now))
		}
	}
	return recs, nil
}

// displayedIn is the conversation that displays the session's messages:
// its own conversation's, else the active binding's, else the one the
// newest entry names.
func displayedIn(key string, recs []binding.Record, entries []transcript.Entry) string {
	if _, ref, ok := sessionkey.ConversationOf(key); ok {
		return ref.ConversationID
	}
	for _, b := range recs {
		if b.Status == binding.StatusActive {
			return b.Conversation.Normalize().ConversationID
		}
	}
	for i := len(entries) - 1; i >= 0; i-- {
		if id := entries[i].Meta[transcript.MetaDisplayedIn]; id != "" {
			return id
		}
	}
	return ""
}

// auditOf runs the audit of the session's conversation, when the console
// can read the platform.
func (c *Console) auditOf(ctx context.Context, p *conversationPage, key string, recs []binding.Record, entries []transcript.Entry) (audit.Report, bool) {
	conv := displayedIn(key, recs, entries)
	p.Audit.Conversation = conv
	switch {
	case c.o.Audit == nil:
		p.Audit.Unavailable = true
		return audit.Report{}, false
	case conv == "":
		p.Audit.Error = "this session is displayed in no conversation (a background run, or a subagent never bound)"
		return audit.Report{}, false
	}
	report, err := c.o.Audit(ctx, conv)
	switch {
	case errors.Is(err, audit.ErrUnknownConversation):
		p.Audit.Error = "no transcript holds a message of conversation " + conv + " yet"
		return audit.Report{}, false
	case err != nil:
		c.o.Log.Warn().Err(err).Str("conversation", conv).Msg("console: audit")
		p.Audit.Error = err.Error()
		return audit.Report{}, false
	}
	p.Audit.At = c.fmtTime(report.At)
	return report, true
}

// alignRows makes the page's rows. With the audit's report, they are its
// rows (display order) from the page's first entry to its last - from
// the start on the oldest page, to the end on the newest - plus the
// page's entries the audit did not compare (no message id, or outside
// its window) after the entry before them. Without it, one row per
// entry, the chat's side unread.
func (c *Console) alignRows(key string, entries []transcript.Entry, report audit.Report, ok, oldest, newest bool) []messageRow {
	var mine []transcript.Folded
	onPage := map[uint64]bool{}
	for _, f := range transcript.Fold(entries) {
		if !f.IsChange() {
			mine = append(mine, f)
			onPage[f.Seq] = true
		}
	}
	lo, hi := -1, -1
	for i, r := range report.Rows {
		if ok && r.Entry != nil && r.Entry.SessionKey == key && onPage[r.Entry.Seq] {
			lo, hi = cmpMin(lo, i), i
		}
	}
	var rows []messageRow
	if lo >= 0 {
		if oldest {
			lo = 0
		}
		if newest {
			hi = len(report.Rows) - 1
		}
		for _, r := range report.Rows[lo : hi+1] {
			rows = append(rows, c.reportRow(key, r))
		}
	}
	placed := map[uint64]bool{}
	for _, r := range rows {
		if r.Entry != nil && r.entryKey == key {
			placed[r.Entry.Seq] = true
		}
	}
	for _, f := range mine {
		if placed[f.Seq] {
			continue
		}
		at := 0
		for i, r := range rows {
			if r.Entry != nil && r.entryKey == key && r.Entry.Seq < f.Seq {
				at = i + 1
			}
		}
		rows = slices.Insert(rows, at, messageRow{ID: firstID(f.MessageIDs), Entry: c.entryCell(f), entryKey: key})
	}
	return rows
}

func cmpMin(cur, i int) int {
	if cur < 0 {
		return i
	}
	return min(cur, i)
}

func firstID(ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	return ids[0]
}

// reportRow is an audit row as the page shows it.
func (c *Console) reportRow(key string, r audit.Row) messageRow {
	row := messageRow{ID: r.MessageID, Displayed: len(r.Messages) > 0, Text: r.Shown(), Diff: string(r.Diff), Detail: r.Detail}
	if row.Displayed {
		m := r.Messages[0]
		row.At, row.Author = c.fmtTime(m.At), m.Author
	}
	for _, m := range r.Messages {
		row.Attachments = append(row.Attachments, m.Attachments...)
		row.Edited = row.Edited || m.Edited
	}
	if r.Entry != nil {
		row.Entry, row.entryKey = c.entryCell(*r.Entry), r.Entry.SessionKey
		row.SameText = row.Displayed && !r.Entry.Deleted && r.Entry.Latest == row.Text
		if row.entryKey != key {
			row.OtherKey = row.entryKey
		}
	}
	return row
}

// entryCell is a folded entry as the page shows it.
func (c *Console) entryCell(f transcript.Folded) *entryCell {
	e := &entryCell{Seq: f.Seq, Generation: f.Generation, At: c.fmtTime(f.At), Role: string(f.Role), Source: string(f.Source), Author: f.Author,
		Text: f.Latest, Edited: f.Edited, Deleted: f.Deleted, Messages: strings.Join(f.MessageIDs, ", "), DeliveryID: f.DeliveryID}
	for _, a := range f.Attachments {
		e.Attachments = append(e.Attachments, fmt.Sprintf("%s (%s, %d bytes)", a.Filename, a.ContentType, a.Size))
	}
	return e
}

// deliveryStates sets each row's entry's delivery state.
func (c *Console) deliveryStates(ctx context.Context, rows []messageRow) error {
	for i := range rows {
		e := rows[i].Entry
		if e == nil || e.DeliveryID == "" {
			continue
		}
		d, ok, err := c.o.Store.GetDelivery(ctx, e.DeliveryID)
		if err != nil {
			return err
		}
		if ok {
			rows[i].DeliveryState = string(d.State)
			rows[i].BadDelivery = d.State != delivery.StateDelivered && d.State != delivery.StateSkipped
		}
	}
	return nil
}

// kindCounts summarises differences: "2 text, 1 missing".
func kindCounts(rows []audit.Row) string {
	n := map[audit.Kind]int{}
	var order []audit.Kind
	for _, r := range rows {
		if n[r.Diff] == 0 {
			order = append(order, r.Diff)
		}
		n[r.Diff]++
	}
	parts := make([]string, 0, len(order))
	for _, k := range order {
		parts = append(parts, fmt.Sprintf("%d %s", n[k], k))
	}
	return strings.Join(parts, ", ")
}

// undelivered lists what was sent (or tried) to this session's chat and
// did not reach it - newest deliveries, plus older failed and unfinished
// ones so they are not missed - and counts the confirmed ones.
func (c *Console) undelivered(ctx context.Context, p *conversationPage, recs []binding.Record) error {
	bindingIDs := map[string]bool{}
	for _, b := range recs {
		bindingIDs[b.ID] = true
	}
	key, agent := p.Key, sessionkey.Agent(p.Key)
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
			return err
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
		if !row.Bad {
			p.Confirmed++
			continue
		}
		p.UndeliveredN++
		if len(p.Undelivered) < conversationCap {
			p.Undelivered = append(p.Undelivered, row)
		}
	}
	return nil
}
