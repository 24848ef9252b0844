package console

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/scheduler"
	"github.com/agentbot/agentbot/store/bolt"
)

var _ Store = (*bolt.Store)(nil)

// Secrets the seeded store holds somewhere; none may reach a page.
const (
	fakeBotToken     = "MTA5ODc2NTQzMjEwOTg3NjU0.GhIjKl.abcdefghijklmnopqrstuvwxyz0123456789AB"
	fakeWebhookToken = "wHkT0k3n_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	fakeInteraction  = "aW50ZXJhY3Rpb246MTIzNDU2Nzg5MDpzZWNyZXQ"
	httpToken        = "console-test-token-123"
)

var t0 = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

const (
	chatKey   = "agent:main:discord:channel:1000"
	subKey    = "agent:main:subagent:s1"
	threadID  = "2000"
	guildID   = "900"
	failedDID = "d-failed"
)

func openStore(t testing.TB) *bolt.Store {
	t.Helper()
	st, err := bolt.Open(t.TempDir()+"/bot.db", bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// seed fills a store with one of everything the pages show.
func seed(t testing.TB, st *bolt.Store, nBindings, nEntries, nDeliveries int) {
	t.Helper()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// Bindings: one active thread binding with a guild, one ended, plus filler.
	recs := []binding.Record{
		{ID: "b-active", TargetSessionKey: subKey, TargetKind: binding.KindSubagent, Status: binding.StatusActive, Label: "research",
			Conversation: binding.ConversationRef{Channel: "discord", AccountID: "default", ConversationID: threadID, ParentConversationID: "1000"},
			BoundBy:      "42", BoundAt: t0.Add(-2 * time.Hour), LastActivityAt: t0.Add(-time.Hour), IdleTimeout: 24 * time.Hour, MaxAge: 3 * time.Hour,
			Metadata: map[string]string{GuildMetadataKey: guildID}},
		{ID: "b-ended", TargetSessionKey: "agent:main:subagent:s0", TargetKind: binding.KindSubagent, Status: binding.StatusEnded,
			Conversation: binding.ConversationRef{Channel: "discord", AccountID: "default", ConversationID: "2001"},
			BoundBy:      "system", BoundAt: t0.Add(-48 * time.Hour), LastActivityAt: t0.Add(-30 * time.Hour), EndedAt: t0.Add(-6 * time.Hour), EndedReason: binding.ReasonThreadDelete},
	}
	for i := range nBindings {
		st := binding.StatusActive
		if i%3 == 0 {
			st = binding.StatusEnded
		}
		recs = append(recs, binding.Record{ID: fmt.Sprintf("bf-%06d", i), TargetSessionKey: fmt.Sprintf("agent:main:subagent:f%d", i), TargetKind: binding.KindSubagent,
			Status: st, Conversation: binding.ConversationRef{Channel: "discord", AccountID: "default", ConversationID: fmt.Sprint(100000 + i)},
			BoundBy: "7", BoundAt: t0.Add(-time.Duration(i) * time.Second), LastActivityAt: t0.Add(-time.Duration(i) * time.Second), IdleTimeout: 24 * time.Hour})
	}
	for len(recs) > 0 {
		n := min(len(recs), 5000)
		must(st.PutBindings(ctx, recs[:n]...))
		recs = recs[n:]
	}
	// Transcript of the chat: nEntries, the last one delivered by d-ok; and
	// one entry whose text has a token pasted by a user.
	for i := 1; i <= nEntries; i++ {
		_, _, err := st.Append(ctx, chatKey, transcript.Entry{Role: transcript.RoleUser, Author: "alice", Text: fmt.Sprintf("message %d", i),
			MessageIDs: []string{fmt.Sprint(5000 + i)}, Source: transcript.SourceUser, At: t0.Add(time.Duration(i-nEntries) * time.Second)})
		must(err)
	}
	_, _, err := st.Append(ctx, chatKey, transcript.Entry{Role: transcript.RoleUser, Author: "mallory", Text: "my token is " + fakeBotToken +
		" and https://discord.com/api/webhooks/123/" + fakeWebhookToken, Source: transcript.SourceUser, At: t0,
		Attachments: []transcript.Attachment{{Filename: "cat.png", ContentType: "image/png", Size: 2048, URL: "https://cdn.discordapp.com/attachments/1/2/cat.png?hm=sig"}}})
	must(err)
	_, _, err = st.Append(ctx, chatKey, transcript.Entry{Role: transcript.RoleAssistant, Text: "job result", MessageIDs: []string{"7777"},
		Source: transcript.SourceJob, DeliveryID: "d-ok", At: t0})
	must(err)
	_, _, err = st.Append(ctx, subKey, transcript.Entry{Role: transcript.RoleUser, Text: "task", Source: transcript.SourceUser, At: t0})
	must(err)
	// Deliveries.
	chat := binding.ConversationRef{Channel: "discord", AccountID: "default", ConversationID: "1000"}
	must(st.PutDelivery(ctx, delivery.Record{Delivery: delivery.Delivery{ID: "d-ok", Target: chat, Text: "job result",
		Producer: delivery.Producer{Source: transcript.SourceJob}, Interaction: &delivery.Interaction{ID: "i1", Token: fakeInteraction}},
		State: delivery.StateDelivered, SessionKey: chatKey, MessageIDs: []string{"7777"}, CreatedAt: t0.Add(-10 * time.Minute), UpdatedAt: t0.Add(-10 * time.Minute)}))
	must(st.PutDelivery(ctx, delivery.Record{Delivery: delivery.Delivery{ID: failedDID, Target: chat, Text: "alert that never arrived",
		Producer: delivery.Producer{Source: transcript.SourceAlert}}, State: delivery.StateFailed, Error: "missing permission (50013)",
		Reason: "bound", CreatedAt: t0.Add(-5 * time.Minute), UpdatedAt: t0.Add(-5 * time.Minute)}))
	must(st.PutDelivery(ctx, delivery.Record{Delivery: delivery.Delivery{ID: "d-pending", Target: binding.ConversationRef{Channel: "discord", ConversationID: threadID},
		Text: "completion", BindingID: "b-active", Producer: delivery.Producer{Source: transcript.SourceAnnounce}}, State: delivery.StatePending,
		CreatedAt: t0.Add(-2 * time.Minute), UpdatedAt: t0.Add(-2 * time.Minute)}))
	for i := range nDeliveries {
		state, reason := delivery.StateDelivered, "fallback-never-bound"
		if i%2 == 0 {
			state, reason = delivery.StateSkipped, "other-agent"
		}
		must(st.PutDelivery(ctx, delivery.Record{Delivery: delivery.Delivery{ID: fmt.Sprintf("df-%04d", i), Target: chat, Text: "filler"},
			State: state, Reason: reason, CreatedAt: t0.Add(-2*time.Hour - time.Duration(i)*time.Second)}))
	}
	// Sessions.
	must(st.PutSessionInfo(ctx, session.Info{Key: subKey, AgentID: "main", Kind: session.KindSubagent, Status: session.StatusRunning, Label: "research", CreatedAt: t0}))
	must(st.PutSessionInfo(ctx, session.Info{Key: "agent:main:subagent:s0", AgentID: "main", Kind: session.KindSubagent, Status: session.StatusOK, CreatedAt: t0}))
	// Webhook credentials: must never be read.
	must(st.PutWebhook(ctx, "1000", "123", fakeWebhookToken))
	// Jobs: a healthy one, a late one, an auto-disabled one.
	daily := scheduler.ScheduleSpec{Kind: scheduler.KindCron, Expr: "30 9 * * *", TZ: "Europe/Berlin", Text: "30 9 * * *"}
	must(st.PutJob(ctx, scheduler.Job{ID: "job-ok", Name: "morning digest", AgentID: "main", Schedule: daily, Prompt: "summarise", Target: scheduler.TargetMain,
		StoredMode: scheduler.ModeInChat, CreatedIn: chat, Enabled: true, State: scheduler.JobState{NextRunAt: t0.Add(20 * time.Hour)}}))
	must(st.PutJob(ctx, scheduler.Job{ID: "job-late", Name: "hourly check", AgentID: "main",
		Schedule: scheduler.ScheduleSpec{Kind: scheduler.KindEvery, Every: time.Hour, Anchor: t0.Add(-24 * time.Hour), Text: "every 1h"},
		Prompt:   "check", Target: scheduler.TargetIsolated, To: "channel:1000", StoredMode: scheduler.ModeBackground, CreatedIn: chat, Enabled: true,
		State: scheduler.JobState{NextRunAt: t0.Add(-3 * time.Hour)}}))
	must(st.PutJob(ctx, scheduler.Job{ID: "job-off", Name: "broken", AgentID: "main", Schedule: daily, Prompt: "fail", Target: scheduler.TargetMain,
		StoredMode: scheduler.ModeInChat, CreatedIn: chat, Enabled: false,
		State: scheduler.JobState{DisabledReason: scheduler.DisabledFailures, ConsecutiveFailures: 3, LastStatus: scheduler.StatusError, LastError: "model timeout"}}))
	must(st.PutRun(ctx, scheduler.Run{JobID: "job-ok", RunID: "r1", Trigger: scheduler.TriggerCatchUp, ScheduledAt: t0.Add(-4 * time.Hour), StartedAt: t0.Add(-time.Hour),
		FinishedAt: t0.Add(-time.Hour + time.Second), Status: scheduler.StatusOK, Late: true, LateBy: 3 * time.Hour,
		Delivery: scheduler.RunDelivery{Status: scheduler.DeliveryDelivered, MessageIDs: []string{"7777"}, Target: "channel:1000"}}, 50))
	must(st.PutRun(ctx, scheduler.Run{JobID: "job-off", RunID: "r1", Trigger: scheduler.TriggerSchedule, StartedAt: t0.Add(-time.Hour),
		Status: scheduler.StatusError, Error: "model timeout", Delivery: scheduler.RunDelivery{Status: scheduler.DeliveryFailed, Error: "not sent"}}, 50))
	seedUsage(t, st)
}

func newTestConsole(t testing.TB, st Store, token string) *Console {
	return New(Options{Store: st, Token: token, Now: func() time.Time { return t0 }, PageSize: 20,
		Status: func() State { return State{Ready: true, Started: t0.Add(-90 * time.Minute)} }})
}

func get(t *testing.T, h http.Handler, method, target string, hdr ...string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(body)
}

func mustContain(t *testing.T, page, body string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("%s: missing %q", page, w)
		}
	}
}

// pages lists every page of the seeded store with text each must show.
var pages = []struct {
	path string
	want []string
}{
	{"/", []string{"ready", "up 1h30m", "Active bindings", ">1<", "Running subagents", "Enabled jobs", ">2<", "missing permission (50013)",
		"alert that never arrived", "hourly check", "overdue by 3h", "auto-disabled after 3 failures", "failed", "Deliveries in the last hour"}},
	{"/bindings", []string{"https://discord.com/channels/900/2000", "research", "in 23h", "in 1h", "thread-delete", "2001", "subagent", "42"}},
	{"/bindings?status=ended", []string{"thread-delete"}},
	{"/bindings?status=active", []string{"b-active"}},
	{"/jobs", []string{"morning digest", "every day at 09:30 (Europe/Berlin)", "in-chat", "background", "every 1h", "late by 3h",
		"Wed 2026-03-11 09:00 CET", "7777", "auto-disabled", "overdue by 3h", "model timeout", "catch-up"}},
	{"/jobs/job-ok", []string{"morning digest", "late by 3h", "7777"}},
	{"/sessions", []string{chatKey, subKey, "research"}},
	{"/sessions/" + chatKey, []string{"message 1", "job result", "7777", "alert that never arrived", "missing permission (50013)", "none: not displayed", "[redacted]", "📎 cat.png (image/png, 2048 bytes)"}},
	{"/sessions/" + subKey, []string{"task", "completion", "pending", "https://discord.com/channels/900/2000"}},
	{"/deliveries", []string{"d-ok", "job result", "delivered", "failed"}},
	{"/deliveries?state=failed", []string{"alert that never arrived"}},
	{"/deliveries?reason=other-agent", []string{"other-agent"}},
	{"/usage", usageWants},
}

func TestEveryPageRenders(t *testing.T) {
	st := openStore(t)
	seed(t, st, 0, 5, 0)
	h := newTestConsole(t, st, "")
	for _, p := range pages {
		code, body := get(t, h, http.MethodGet, p.path)
		if code != http.StatusOK {
			t.Errorf("GET %s = %d\n%s", p.path, code, body)
			continue
		}
		mustContain(t, p.path, body, p.want...)
		if !strings.Contains(body, "</html>") {
			t.Errorf("%s: page not complete", p.path)
		}
	}
	// Times are shown in the configured zone.
	c := New(Options{Store: st, Location: time.FixedZone("XYZ", 3600), Now: func() time.Time { return t0 }})
	_, body := get(t, c, http.MethodGet, "/bindings")
	mustContain(t, "zone", body, "times in XYZ", "2026-03-10 11:00:00 XYZ")
}

func TestNotFoundAndBadQuery(t *testing.T) {
	st := openStore(t)
	seed(t, st, 0, 1, 0)
	h := newTestConsole(t, st, "")
	for path, want := range map[string]int{
		"/nope": 404, "/sessions/agent:main:discord:channel:404": 404, "/jobs/none": 404,
		"/bindings?page=0": 400, "/bindings?status=weird": 400, "/deliveries?state=weird": 400, "/sessions/" + chatKey + "?from=x": 400,
		"/bindings?page=99": 200,
	} {
		if code, body := get(t, h, http.MethodGet, path); code != want {
			t.Errorf("GET %s = %d, want %d\n%s", path, code, want, body)
		}
	}
}

func TestReadOnly(t *testing.T) {
	st := openStore(t)
	seed(t, st, 0, 1, 0)
	h := newTestConsole(t, st, "")
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
		for _, p := range []string{"/", "/bindings", "/deliveries", "/sessions/" + chatKey, "/jobs/job-ok"} {
			req := httptest.NewRequest(m, p, strings.NewReader("x=1"))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET, HEAD" {
				t.Errorf("%s %s = %d (Allow %q), want 405", m, p, rec.Code, rec.Header().Get("Allow"))
			}
		}
	}
	code, body := get(t, h, http.MethodHead, "/")
	if code != 200 || body != "" {
		t.Errorf("HEAD / = %d with %d bytes", code, len(body))
	}
}

func TestPagination(t *testing.T) {
	st := openStore(t)
	seed(t, st, 95, 130, 70) // 97 bindings, 132 entries, 73 deliveries
	h := newTestConsole(t, st, "")
	rows := regexp.MustCompile(`<tr(?: class="[a-z ]*")?>\s*<td`)
	count := func(body string) int { return len(rows.FindAllString(body, -1)) }

	_, body := get(t, h, "GET", "/bindings")
	mustContain(t, "bindings p1", body, "page 1 of 5", "rows 1–20 of 97", `href="/bindings?page=2"`, "bf-000001")
	if n := count(body); n != 20 {
		t.Errorf("bindings page 1 has %d rows", n)
	}
	_, body = get(t, h, "GET", "/bindings?page=5")
	mustContain(t, "bindings p5", body, "rows 81–97 of 97", `href="/bindings?page=4"`)
	if strings.Contains(body, "next →") {
		t.Error("last bindings page links to a next page")
	}
	_, body = get(t, h, "GET", "/bindings?status=active&page=2")
	mustContain(t, "active p2", body, "of 64", `href="/bindings?page=3&amp;status=active"`)

	// Transcript: newest page first (40 entries), then older pages by seq.
	_, body = get(t, h, "GET", "/sessions/"+chatKey)
	mustContain(t, "tail", body, "seq 93–132", "from=53")
	if strings.Contains(body, "message 92<") {
		t.Error("tail page shows an entry before its range")
	}
	_, body = get(t, h, "GET", "/sessions/"+chatKey+"?from=53")
	mustContain(t, "range", body, "seq 53–92", "from=93", "from=13", "newest")
	_, body = get(t, h, "GET", "/sessions/"+chatKey+"?from=1")
	mustContain(t, "first", body, "seq 1–40", "message 1<")
	if strings.Contains(body, "← older") {
		t.Error("first transcript page links to older entries")
	}

	// Deliveries: pages without a total; filters keep their parameters.
	_, body = get(t, h, "GET", "/deliveries?page=2")
	mustContain(t, "deliveries p2", body, `href="/deliveries?page=1"`, `href="/deliveries?page=3"`)
	if n := count(body); n != 20 {
		t.Errorf("deliveries page 2 has %d rows", n)
	}
	_, body = get(t, h, "GET", "/deliveries?state=skipped&reason=other")
	mustContain(t, "filtered", body, "rows 1–20 of 35", `href="/deliveries?page=2&amp;reason=other&amp;state=skipped"`)
	if strings.Contains(body, "fallback-never-bound") {
		t.Error("reason filter let other reasons through")
	}
	_, body = get(t, h, "GET", "/deliveries?state=failed")
	if n := count(body); n != 1 {
		t.Errorf("failed filter shows %d rows, want 1", n)
	}
}

func TestTokenRequired(t *testing.T) {
	st := openStore(t)
	seed(t, st, 0, 1, 0)
	h := newTestConsole(t, st, httpToken)
	for _, hdr := range [][]string{nil, {"Authorization", "Bearer wrong"}, {"Authorization", "Basic " + basic("u", "wrong")}} {
		code, body := get(t, h, "GET", "/", hdr...)
		if code != http.StatusUnauthorized || strings.Contains(body, "Overview") {
			t.Errorf("%v: got %d", hdr, code)
		}
	}
	if code, _ := get(t, h, "GET", "/?token="+httpToken); code != http.StatusUnauthorized {
		t.Errorf("token in the URL accepted: %d", code)
	}
	if code, _ := get(t, h, "POST", "/"); code != http.StatusUnauthorized {
		t.Errorf("unauthenticated POST = %d, want 401", code)
	}
	for _, hdr := range [][]string{{"Authorization", "Bearer " + httpToken}, {"Authorization", "Basic " + basic("operator", httpToken)}} {
		code, body := get(t, h, "GET", "/", hdr...)
		if code != 200 || !strings.Contains(body, "Overview") {
			t.Errorf("%v: got %d", hdr[1][:6], code)
		}
		if code, _ := get(t, h, "POST", "/", hdr...); code != http.StatusMethodNotAllowed {
			t.Errorf("authenticated POST = %d, want 405", code)
		}
	}
}

func basic(u, p string) string {
	req, _ := http.NewRequest("GET", "/", nil)
	req.SetBasicAuth(u, p)
	return strings.TrimPrefix(req.Header.Get("Authorization"), "Basic ")
}

func TestCheckAccess(t *testing.T) {
	for _, tc := range []struct {
		listen, token string
		ok            bool
	}{
		{"", "", true}, {"127.0.0.1:9464", "", true}, {"localhost:9464", "", true}, {"[::1]:9464", "", true}, {"127.0.0.2:1", "", true},
		{"0.0.0.0:9464", "", false}, {":9464", "", false}, {"[::]:9464", "", false}, {"192.168.1.5:80", "", false}, {"bot.example.com:80", "", false},
		{"0.0.0.0:9464", "secret", true},
	} {
		err := CheckAccess(tc.listen, tc.token)
		if (err == nil) != tc.ok {
			t.Errorf("CheckAccess(%q, %q) = %v", tc.listen, tc.token, err)
		}
	}
	err := CheckAccess("0.0.0.0:9464", "")
	want := "http.listen 0.0.0.0:9464 is not loopback: set http.token (e.g. ${BOT_HTTP_TOKEN}) or listen on 127.0.0.1"
	if err == nil || err.Error() != want {
		t.Errorf("error = %v\nwant    %s", err, want)
	}
}

// tokenLike matches what a Discord bot token, webhook URL token or
// interaction token looks like.
var tokenLike = regexp.MustCompile(`[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{5,7}\.[A-Za-z0-9_-]{25,}|webhooks/\d+/[A-Za-z0-9_-]{20,}|aW50ZXJhY3Rpb246`)

func TestNoSecretsInPages(t *testing.T) {
	st := openStore(t)
	seed(t, st, 10, 5, 5)
	h := newTestConsole(t, st, httpToken)
	auth := []string{"Authorization", "Bearer " + httpToken}
	for _, p := range pages {
		code, body := get(t, h, "GET", p.path, auth...)
		if code != 200 {
			t.Errorf("%s = %d", p.path, code)
		}
		for _, secret := range []string{fakeBotToken, fakeWebhookToken, fakeInteraction, httpToken} {
			if strings.Contains(body, secret) {
				t.Errorf("%s shows a secret %.12s…", p.path, secret)
			}
		}
		if m := tokenLike.FindString(body); m != "" {
			t.Errorf("%s shows a token-looking string %q", p.path, m)
		}
	}
	// And a 401 page does not echo what was sent.
	_, body := get(t, h, "GET", "/", "Authorization", "Bearer "+fakeBotToken)
	if strings.Contains(body, fakeBotToken) {
		t.Error("401 page echoes the credential")
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"token " + fakeBotToken + " end":                           "token [redacted] end",
		"https://discord.com/api/webhooks/123/" + fakeWebhookToken: "https://discord.com/api/webhooks/123/[redacted]",
		"Authorization: Bearer abcdefgh12345":                      "Authorization: Bearer [redacted]",
		fakeInteraction:                                            "[redacted]",
		"agent:main:discord:channel:1000 stays":                    "agent:main:discord:channel:1000 stays",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMountKeepsOtherRoutes(t *testing.T) {
	st := openStore(t)
	seed(t, st, 0, 1, 0)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	newTestConsole(t, st, "").Mount(mux)
	if code, body := get(t, mux, "GET", "/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz = %d %q", code, body)
	}
	if code, _ := get(t, mux, "GET", "/"); code != 200 {
		t.Errorf("/ = %d", code)
	}
	if code, _ := get(t, mux, "POST", "/bindings"); code != 405 {
		t.Errorf("POST /bindings = %d", code)
	}
}

// TestRule1ExceptionsShowAsWarnings: a delivery displayed without a
// transcript entry and a job run that had one are shown as warn
// diagnostics with their reason.
func TestRule1ExceptionsShowAsWarnings(t *testing.T) {
	st := openStore(t)
	seed(t, st, 0, 1, 0)
	ctx := context.Background()
	chat := binding.ConversationRef{Channel: "discord", AccountID: "default", ConversationID: "1000"}
	if err := st.PutDelivery(ctx, delivery.Record{Delivery: delivery.Delivery{ID: "job:job-ok:run:r2", Target: chat, Text: "into a thread bound elsewhere",
		Producer: delivery.Producer{Source: transcript.SourceJob, AgentID: "main"}}, State: delivery.StateDelivered, Reason: delivery.SkipOtherAgent,
		MessageIDs: []string{"8888"}, CreatedAt: t0.Add(-time.Minute), UpdatedAt: t0.Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := st.PutRun(ctx, scheduler.Run{JobID: "job-ok", RunID: "r2", Trigger: scheduler.TriggerSchedule, StartedAt: t0.Add(-time.Minute), FinishedAt: t0,
		Status: scheduler.StatusOK, Delivery: scheduler.RunDelivery{Status: scheduler.DeliveryDelivered, MessageIDs: []string{"8888"}},
		Diagnostics: []scheduler.Diagnostic{{Level: "warn", Reason: delivery.SkipOtherAgent, DeliveryID: "job:job-ok:run:r2", Detail: "bound to a different agent"}}}, 50); err != nil {
		t.Fatal(err)
	}
	h := newTestConsole(t, st, "")
	_, body := get(t, h, http.MethodGet, "/deliveries")
	mustContain(t, "/deliveries", body, `class="pill warn">warn: the conversation is bound to a different agent`)
	_, body = get(t, h, http.MethodGet, "/jobs/job-ok")
	mustContain(t, "/jobs/job-ok", body, `class="pill warn">warn: bound-to-other-agent: bound to a different agent`)
}
