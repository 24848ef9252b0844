package console

import (
	"cmp"
	"context"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/core/sessionkey"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/internal/redact"
	"github.com/agentbot/agentbot/scheduler"
)

// Limits on what one request reads.
const (
	failuresShown   = 10
	runsPerJob      = 5
	hourScanCap     = 5000  // deliveries read to count the last hour
	reasonScanCap   = 10000 // deliveries read when filtering by reason
	sessionScanCap  = 2000  // newest deliveries searched for a conversation's
	stateScanCap    = 500   // failed/pending deliveries searched for a conversation's
	conversationCap = 100   // deliveries listed beside a transcript
	lateGrace       = time.Minute
)

// GuildMetadataKey is the binding metadata key that, when set, lets the
// console link a conversation to https://discord.com/channels/<guild>/<id>.
const GuildMetadataKey = "guildId"

type base struct {
	Title string
	Nav   string
	Now   string
	Zone  string
}

func (c *Console) base(nav, title string) base {
	return base{Title: title, Nav: nav, Now: c.fmtTime(c.o.Now()), Zone: c.o.Location.String()}
}

type errorPage struct {
	base
	Status  int
	Message string
}

// ---- formatting ----

func (c *Console) fmtTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.In(c.o.Location).Format("2006-01-02 15:04:05 MST")
}

func fmtIn(t time.Time, loc *time.Location) string {
	if t.IsZero() {
		return "—"
	}
	return t.In(loc).Format("Mon 2006-01-02 15:04 MST")
}

func human(d time.Duration) string {
	if d < 0 {
		d = -d
	}
	return scheduler.HumanDuration(d)
}

// countdown describes a deadline: "in 3h5m", "passed 2m ago" or "off".
func countdown(deadline, now time.Time, enabled bool) (string, bool) {
	if !enabled {
		return "off", false
	}
	if d := deadline.Sub(now); d > 0 {
		return "in " + human(d), false
	}
	return "passed " + human(now.Sub(deadline)) + " ago", true
}

func preview(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// Redact replaces token-looking strings (Discord bot tokens, webhook and
// interaction URL tokens, interaction tokens, credentials) with
// "[redacted]", by the rules of internal/redact.
func Redact(s string) string { return redact.String(s) }

func (c *Console) funcs() template.FuncMap {
	return template.FuncMap{
		"t":       c.fmtTime,
		"sessURL": sessURL,
		"jobURL":  func(id string) string { return "/jobs/" + url.PathEscape(id) },
		"join":    strings.Join,
		"preview": preview,
	}
}

func sessURL(key string) string { return "/sessions/" + url.PathEscape(key) }

// query builds "path?k=v..." dropping empty values.
func query(path string, kv ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

// ---- pagination ----

type pager struct {
	Page, Pages, Total int
	Prev, Next         string
	From, To           int // 1-based rows shown
}

func pageParam(r *http.Request) (int, error) {
	v := r.URL.Query().Get("page")
	if v == "" {
		return 1, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, badRequest("page %q is not a positive number", v)
	}
	return n, nil
}

// paginate returns the [lo, hi) slice bounds of page among total rows and
// the links around it; link(n) is the URL of page n.
func paginate(page, size, total int, link func(int) string) (int, int, pager) {
	pages := max(1, (total+size-1)/size)
	lo := min((page-1)*size, total)
	hi := min(lo+size, total)
	p := pager{Page: page, Pages: pages, Total: total, From: lo + 1, To: hi}
	if page > 1 {
		p.Prev = link(min(page-1, pages))
	}
	if page < pages {
		p.Next = link(page + 1)
	}
	return lo, hi, p
}

// ---- conversations ----

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

// ---- bindings ----

func isActive(r binding.Record) bool { return r.Status != binding.StatusEnded }

// sortBindings orders active before ended, then newest bound first, then
// by id. It sorts small keys and permutes once: records are large, and
// swapping them dominated sorting 100k of them.
func sortBindings(recs []binding.Record) {
	type key struct {
		ended bool
		at    int64
		id    string
		i     int
	}
	keys := make([]key, len(recs))
	for i, r := range recs {
		keys[i] = key{!isActive(r), r.BoundAt.UnixNano(), r.ID, i}
	}
	slices.SortFunc(keys, func(a, b key) int {
		if a.ended != b.ended {
			if a.ended {
				return 1
			}
			return -1
		}
		if c := cmp.Compare(b.at, a.at); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	sorted := make([]binding.Record, len(recs))
	for i, k := range keys {
		sorted[i] = recs[k.i]
	}
	copy(recs, sorted)
}

type bindingRow struct {
	ID, Status, Kind, Label, BoundBy, Target string
	Conversation, Parent                     convView
	BoundAt, LastActivity, EndedAt           string
	Idle, MaxAge                             string
	IdleDue, MaxAgeDue                       bool
	EndedReason                              string
	Active                                   bool
}

func (c *Console) bindingRow(r binding.Record, now time.Time) bindingRow {
	guild := r.Metadata[GuildMetadataKey]
	row := bindingRow{ID: r.ID, Status: string(r.Status), Kind: string(r.TargetKind), Label: r.Label, BoundBy: r.BoundBy,
		Target: r.TargetSessionKey, Conversation: conversation(r.Conversation, guild),
		BoundAt: c.fmtTime(r.BoundAt), LastActivity: c.fmtTime(r.LastActivityAt), EndedAt: c.fmtTime(r.EndedAt),
		EndedReason: r.EndedReason, Active: isActive(r)}
	if r.Conversation.ParentConversationID != "" {
		row.Parent = conversation(binding.ConversationRef{Channel: r.Conversation.Channel, ConversationID: r.Conversation.ParentConversationID}, guild)
	}
	if row.Active {
		row.Idle, row.IdleDue = countdown(r.LastActivityAt.Add(r.IdleTimeout), now, r.IdleTimeout > 0)
		row.MaxAge, row.MaxAgeDue = countdown(r.BoundAt.Add(r.MaxAge), now, r.MaxAge > 0)
	} else {
		row.Idle, row.MaxAge = "—", "—"
	}
	return row
}

type bindingsPage struct {
	base
	Status        string
	Active, Ended int
	Rows          []bindingRow
	Pager         pager
	Filters       []filterLink
}

type filterLink struct {
	Label, URL string
	On         bool
}

func (c *Console) bindings(r *http.Request) (any, error) {
	page, err := pageParam(r)
	if err != nil {
		return nil, err
	}
	status := r.URL.Query().Get("status")
	if status != "" && status != "active" && status != "ended" {
		return nil, badRequest("status %q: use active or ended", status)
	}
	recs, err := c.allBindings(r.Context())
	if err != nil {
		return nil, err
	}
	// recs is sorted active first: the active ones are a prefix.
	active, _ := slices.BinarySearchFunc(recs, false, func(r binding.Record, _ bool) int {
		if isActive(r) {
			return -1
		}
		return 1
	})
	sel := recs
	switch status {
	case "active":
		sel = recs[:active]
	case "ended":
		sel = recs[active:]
	}
	lo, hi, pg := paginate(page, c.o.PageSize, len(sel), func(n int) string {
		return query("/bindings", "status", status, "page", strconv.Itoa(n))
	})
	now := c.o.Now()
	p := bindingsPage{base: c.base("bindings", "Bindings"), Status: status, Active: active, Ended: len(recs) - active, Pager: pg}
	for _, rec := range sel[lo:hi] {
		p.Rows = append(p.Rows, c.bindingRow(rec, now))
	}
	for _, f := range []struct{ label, v string }{{"all", ""}, {"active", "active"}, {"ended", "ended"}} {
		p.Filters = append(p.Filters, filterLink{Label: f.label, URL: query("/bindings", "status", f.v), On: f.v == status})
	}
	return p, nil
}

// ---- deliveries ----

var deliveryStates = []delivery.PendingState{delivery.StatePending, delivery.StateSent, delivery.StateDelivered, delivery.StateFailed, delivery.StateSkipped}

type deliveryRow struct {
	ID, State, Source, Session, Reason, Error, Text, Messages string
	Target                                                    convView
	Created, Updated                                          string
	Bad                                                       bool // failed or still pending/sent
	// Warn is the Rule 1 exception of a delivered record ("" when none):
	// displayed, and no transcript holds it.
	Warn string
}

func (c *Console) deliveryRow(r delivery.Record) deliveryRow {
	return deliveryRow{ID: r.Delivery.ID, State: string(r.State), Source: string(r.Delivery.Producer.Source), Session: r.SessionKey,
		Reason: r.Reason, Error: r.Error, Text: preview(r.Delivery.Text, 140), Messages: strings.Join(r.MessageIDs, ", "),
		Target: conversation(r.Delivery.Target, ""), Created: c.fmtTime(r.CreatedAt), Updated: c.fmtTime(r.UpdatedAt),
		Bad: r.State == delivery.StateFailed || r.State == delivery.StatePending || r.State == delivery.StateSent, Warn: warnText(r)}
}

// warnText describes a delivery's Rule 1 exception, if it is one.
func warnText(r delivery.Record) string {
	d, ok := delivery.RecordDiagnostic(r)
	if !ok {
		return ""
	}
	return d.Level + ": " + d.Detail
}

type deliveriesPage struct {
	base
	State, Reason string
	States        []filterLink
	Rows          []deliveryRow
	Pager         pager
	Scanned       int
	Capped        bool
}

func (c *Console) deliveries(r *http.Request) (any, error) {
	page, err := pageParam(r)
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	state := delivery.PendingState(q.Get("state"))
	if state != "" && !slices.Contains(deliveryStates, state) {
		return nil, badRequest("state %q: use pending, sent, delivered, failed or skipped", state)
	}
	reason := strings.TrimSpace(q.Get("reason"))
	size := c.o.PageSize
	p := deliveriesPage{base: c.base("deliveries", "Deliveries"), State: string(state), Reason: reason}
	for _, s := range append([]delivery.PendingState{""}, deliveryStates...) {
		label := string(s)
		if s == "" {
			label = "all"
		}
		p.States = append(p.States, filterLink{Label: label, URL: query("/deliveries", "state", string(s), "reason", reason), On: s == state})
	}
	link := func(n int) string {
		return query("/deliveries", "state", string(state), "reason", reason, "page", strconv.Itoa(n))
	}
	var recs []delivery.Record
	if reason == "" {
		// Read only up to this page (plus one row to know there is more).
		recs, err = c.o.Store.Deliveries(r.Context(), state, page*size+1)
		if err != nil {
			return nil, err
		}
		total := len(recs)
		lo, hi, pg := paginate(page, size, total, link)
		if total > page*size { // more beyond: the exact total is unknown
			pg.Total, pg.Pages = -1, page+1
		}
		p.Pager = pg
		for _, rec := range recs[lo:hi] {
			p.Rows = append(p.Rows, c.deliveryRow(rec))
		}
		return p, nil
	}
	recs, err = c.o.Store.Deliveries(r.Context(), state, reasonScanCap)
	if err != nil {
		return nil, err
	}
	p.Scanned, p.Capped = len(recs), len(recs) >= reasonScanCap
	needle := strings.ToLower(reason)
	var sel []delivery.Record
	for _, rec := range recs {
		if strings.Contains(strings.ToLower(rec.Reason), needle) || strings.Contains(strings.ToLower(rec.Error), needle) {
			sel = append(sel, rec)
		}
	}
	lo, hi, pg := paginate(page, size, len(sel), link)
	p.Pager = pg
	for _, rec := range sel[lo:hi] {
		p.Rows = append(p.Rows, c.deliveryRow(rec))
	}
	return p, nil
}

// ---- jobs ----

type runRow struct {
	RunID, Trigger, Status, Error, Session      string
	Scheduled, Started, Finished                string
	Late                                        string
	Missed                                      int
	Delivery, DeliveryError, Messages, DeliveTo string
	Bad                                         bool
	// Diagnostics are the run's warnings ("warn: <reason>: <detail>").
	Diagnostics []string
}

type jobRow struct {
	ID, Name, Mode, Schedule, Zone, Target, To, Prompt string
	Enabled                                            bool
	Disabled                                           string
	NextJob, NextLocal                                 string
	Failures                                           int
	LastStatus, LastError                              string
	Late                                               string // why the job is late, "" when it is not
	AutoDisabled                                       bool
	Runs                                               []runRow
	Describe                                           string
}

func jobLoc(j scheduler.Job, def *time.Location) *time.Location {
	if j.Schedule.TZ != "" {
		if l, err := time.LoadLocation(j.Schedule.TZ); err == nil {
			return l
		}
	}
	return def
}

func (c *Console) runRow(r scheduler.Run) runRow {
	row := runRow{RunID: r.RunID, Trigger: r.Trigger, Status: string(r.Status), Error: preview(r.Error, 200), Session: r.SessionKey,
		Scheduled: c.fmtTime(r.ScheduledAt), Started: c.fmtTime(r.StartedAt), Finished: c.fmtTime(r.FinishedAt), Missed: r.Missed,
		Delivery: string(r.Delivery.Status), DeliveryError: preview(r.Delivery.Error, 200), Messages: strings.Join(r.Delivery.MessageIDs, ", "),
		DeliveTo: r.Delivery.Target,
		Bad:      r.Status == scheduler.StatusError || r.Delivery.Status == scheduler.DeliveryFailed}
	for _, d := range r.Diagnostics {
		row.Diagnostics = append(row.Diagnostics, d.Level+": "+d.Reason+": "+d.Detail)
	}
	if r.Late {
		row.Late = "late"
		if r.LateBy > 0 {
			row.Late = "late by " + human(r.LateBy)
		}
	}
	return row
}

func (c *Console) jobRow(ctx context.Context, j scheduler.Job, runs int, now time.Time) (jobRow, error) {
	loc := jobLoc(j, time.UTC)
	row := jobRow{ID: j.ID, Name: j.Name, Mode: string(j.Mode()), Schedule: scheduler.ScheduleWords(j.Schedule, loc), Zone: loc.String(),
		Target: j.Target, To: j.To, Prompt: preview(j.Prompt, 200), Enabled: j.Enabled, Disabled: j.State.DisabledReason,
		NextJob: fmtIn(j.State.NextRunAt, loc), NextLocal: c.fmtTime(j.State.NextRunAt), Failures: j.State.ConsecutiveFailures,
		LastStatus: string(j.State.LastStatus), LastError: preview(j.State.LastError, 200),
		AutoDisabled: !j.Enabled && j.State.DisabledReason == scheduler.DisabledFailures,
		Describe:     scheduler.Describe(j, time.UTC)}
	if j.Enabled && !j.State.NextRunAt.IsZero() && now.Sub(j.State.NextRunAt) > lateGrace {
		row.Late = "overdue by " + human(now.Sub(j.State.NextRunAt))
	}
	rs, err := c.o.Store.Runs(ctx, j.ID, runs)
	if err != nil {
		return row, err
	}
	for _, r := range rs {
		row.Runs = append(row.Runs, c.runRow(r))
	}
	if row.Late == "" && len(rs) > 0 && rs[0].Late {
		row.Late = "last run " + c.runRow(rs[0]).Late
	}
	return row, nil
}

type jobsPage struct {
	base
	Jobs []jobRow
}

func (c *Console) jobs(r *http.Request) (any, error) {
	js, err := c.o.Store.Jobs(r.Context())
	if err != nil {
		return nil, err
	}
	now := c.o.Now()
	p := jobsPage{base: c.base("jobs", "Jobs and runs")}
	for _, j := range js {
		row, err := c.jobRow(r.Context(), j, runsPerJob, now)
		if err != nil {
			return nil, err
		}
		p.Jobs = append(p.Jobs, row)
	}
	return p, nil
}

type jobPage struct {
	base
	Job   jobRow
	Rows  []runRow
	Pager pager
}

func (c *Console) job(r *http.Request) (any, error) {
	page, err := pageParam(r)
	if err != nil {
		return nil, err
	}
	id := r.PathValue("id")
	js, err := c.o.Store.Jobs(r.Context())
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(js, func(j scheduler.Job) bool { return j.ID == id })
	if i < 0 {
		return nil, notFound("job %q not found", id)
	}
	row, err := c.jobRow(r.Context(), js[i], 0, c.o.Now())
	if err != nil {
		return nil, err
	}
	lo, hi, pg := paginate(page, c.o.PageSize, len(row.Runs), func(n int) string {
		return query("/jobs/"+url.PathEscape(id), "page", strconv.Itoa(n))
	})
	p := jobPage{base: c.base("jobs", "Job "+js[i].Name), Job: row, Rows: row.Runs[lo:hi], Pager: pg}
	return p, nil
}

// ---- overview ----

type countRow struct {
	State string
	Count int
	URL   string
}

type overviewPage struct {
	base
	Gateway, Started, Uptime  string
	Ready, Known              bool
	ActiveBindings, Ended     int
	RunningSubagents, AllSubs int
	EnabledJobs, AllJobs      int
	LastHour                  []countRow
	LastHourTotal             int
	LastHourCapped            bool
	Failures                  []deliveryRow
	Attention                 []jobRow
}

func (c *Console) overview(r *http.Request) (any, error) {
	ctx := r.Context()
	now := c.o.Now()
	p := overviewPage{base: c.base("overview", "Overview"), Gateway: "unknown", Started: "—", Uptime: "—"}
	if c.o.Status != nil {
		st := c.o.Status()
		p.Known, p.Ready = true, st.Ready
		p.Gateway = "connecting"
		if st.Ready {
			p.Gateway = "ready"
		}
		if !st.Started.IsZero() {
			p.Started, p.Uptime = c.fmtTime(st.Started), human(now.Sub(st.Started))
		}
	}
	recs, err := c.allBindings(ctx)
	if err != nil {
		return nil, err
	}
	for _, b := range recs {
		if !isActive(b) {
			break // sorted: active ones first
		}
		p.ActiveBindings++
	}
	p.Ended = len(recs) - p.ActiveBindings
	infos, err := c.o.Store.SessionInfos(ctx)
	if err != nil {
		return nil, err
	}
	for _, in := range infos {
		if in.Kind == session.KindSubagent {
			p.AllSubs++
			if in.Status == session.StatusRunning {
				p.RunningSubagents++
			}
		}
	}
	js, err := c.o.Store.Jobs(ctx)
	if err != nil {
		return nil, err
	}
	p.AllJobs = len(js)
	for _, j := range js {
		if j.Enabled {
			p.EnabledJobs++
		}
		row, err := c.jobRow(ctx, j, 1, now)
		if err != nil {
			return nil, err
		}
		if row.Late != "" || row.AutoDisabled {
			p.Attention = append(p.Attention, row)
		}
	}
	// Deliveries of the last hour, by state (newest first: stop at the hour).
	recent, err := c.o.Store.Deliveries(ctx, "", hourScanCap)
	if err != nil {
		return nil, err
	}
	counts := map[delivery.PendingState]int{}
	since := now.Add(-time.Hour)
	n := 0
	for _, d := range recent {
		if d.CreatedAt.Before(since) {
			break
		}
		counts[d.State]++
		n++
	}
	p.LastHourTotal, p.LastHourCapped = n, n == hourScanCap
	for _, s := range deliveryStates {
		p.LastHour = append(p.LastHour, countRow{State: string(s), Count: counts[s], URL: query("/deliveries", "state", string(s))})
	}
	failed, err := c.o.Store.Deliveries(ctx, delivery.StateFailed, failuresShown)
	if err != nil {
		return nil, err
	}
	for _, d := range failed {
		p.Failures = append(p.Failures, c.deliveryRow(d))
	}
	return p, nil
}

// ---- sessions ----

type sessionRow struct {
	Key, Kind, Label, Status string
}

type sessionsPage struct {
	base
	Rows  []sessionRow
	Pager pager
}

func (c *Console) sessions(r *http.Request) (any, error) {
	page, err := pageParam(r)
	if err != nil {
		return nil, err
	}
	keys, err := c.o.Store.Sessions(r.Context())
	if err != nil {
		return nil, err
	}
	infos, err := c.o.Store.SessionInfos(r.Context())
	if err != nil {
		return nil, err
	}
	byKey := make(map[string]session.Info, len(infos))
	for _, in := range infos {
		byKey[in.Key] = in
	}
	lo, hi, pg := paginate(page, c.o.PageSize, len(keys), func(n int) string { return query("/sessions", "page", strconv.Itoa(n)) })
	p := sessionsPage{base: c.base("sessions", "Sessions"), Pager: pg}
	for _, k := range keys[lo:hi] {
		in := byKey[k]
		p.Rows = append(p.Rows, sessionRow{Key: k, Kind: cmp.Or(string(in.Kind), sessionkey.Kind(k)), Label: in.Label, Status: string(in.Status)})
	}
	return p, nil
}

// ---- conversation ----

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
	latest, deleted := map[uint64]string{}, map[uint64]bool{}
	for _, e := range entries {
		switch e.Source {
		case transcript.SourceEdit:
			latest[e.Target] = e.Text
		case transcript.SourceDeletion:
			deleted[e.Target] = true
		}
	}
	for _, e := range entries {
		text := e.Text
		switch t, edited := latest[e.Seq]; {
		case e.Deleted || deleted[e.Seq]:
			text = "(deleted)"
		case edited:
			text = t + " (edited)"
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
