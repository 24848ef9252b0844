package console

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/audit"
	"github.com/agentbot/agentbot/core/transcript"
)

// chatDisplay is channel 1000 as the platform shows it after seed(t, st,
// _, n, _): message i of the transcript (5000+i), except that message
// 5000+n-2 was edited behind the bot's back and 5000+n-3 deleted, the job
// result 7777, and a bot message 9999 no transcript holds.
type chatDisplay struct{ n int }

func (d chatDisplay) Read(_ context.Context, t audit.Target, oldest string, limit int) ([]audit.Message, error) {
	if t.ID != "1000" {
		return nil, fmt.Errorf("unknown channel %s", t.ID)
	}
	var out []audit.Message
	for i := 1; i <= d.n; i++ {
		m := audit.Message{ID: fmt.Sprint(5000 + i), Conversation: "1000", Author: "alice", Text: fmt.Sprintf("message %d", i),
			At: t0.Add(time.Duration(i-d.n) * time.Second)}
		switch i {
		case d.n - 3:
			continue
		case d.n - 2:
			m.Text, m.Edited = "message edited behind our back", true
		}
		out = append(out, m)
	}
	// Bot messages older than the audit's grace (the clock is t0).
	out = append(out, audit.Message{ID: "7777", Conversation: "1000", Author: "bot", Text: "job result", FromBot: true, At: t0.Add(-2 * time.Minute)},
		audit.Message{ID: "9999", Conversation: "1000", Author: "bot", Text: "posted past the transcript", FromBot: true, At: t0.Add(-time.Minute),
			Attachments: []string{"report.pdf"}})
	if len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out, nil
}

func newAuditConsole(t testing.TB, st Store, n int) *Console {
	a := audit.New(audit.Options{}, audit.Deps{Transcripts: st, Displays: map[string]audit.Display{"discord": chatDisplay{n}},
		Clock: fixedClock{}})
	return New(Options{Store: st, Now: func() time.Time { return t0 }, PageSize: 20, Audit: a.Conversation,
		Status: func() State { return State{Ready: true, Started: t0.Add(-90 * time.Minute)} }})
}

type fixedClock struct{}

func (fixedClock) Now() time.Time { return t0 }

// TestConversationShowsThePromise: with the audit, each row is a message
// as the chat displays it beside its transcript entry; the differences
// are highlighted and summarised; a message no transcript holds sits where
// the chat shows it.
func TestConversationShowsThePromise(t *testing.T) {
	st := openStore(t)
	seed(t, st, 0, 6, 0)
	code, body := get(t, newAuditConsole(t, st, 6), http.MethodGet, "/sessions/"+chatKey)
	if code != http.StatusOK {
		t.Fatalf("GET = %d\n%s", code, body)
	}
	mustContain(t, "promise", body, "3 difference(s)", "1 extra, 1 text, 1 missing",
		"message <span class=\"mono\">5003</span> · entry #3", "message edited behind our back", "📎 report.pdf")
	// Row order is the chat's: 7777, then 9999 (no entry), marked missing.
	i7, i9 := strings.Index(body, `<div class="mono mute">7777</div>`), strings.Index(body, `<div class="mono mute">9999</div>`)
	if i7 < 0 || i9 < 0 || i9 < i7 {
		t.Fatalf("rows 7777 at %d and 9999 at %d: want both, 9999 after", i7, i9)
	}
	if n := strings.Count(body, `<tr class="bad">`) - 1; n != 3 { // minus the failed delivery's row
		t.Errorf("%d highlighted rows, want 3", n)
	}
	// The entry without a message id (mallory's) is still on the page.
	mustContain(t, "promise", body, "📎 cat.png (image/png, 2048 bytes)")
}

// TestConversationPromiseIntact: an intact conversation says so.
func TestConversationPromiseIntact(t *testing.T) {
	st := openStore(t)
	seed(t, st, 0, 3, 0)
	a := audit.New(audit.Options{}, audit.Deps{Transcripts: st, Displays: map[string]audit.Display{"discord": intactDisplay{st}}})
	h := New(Options{Store: st, Now: func() time.Time { return t0 }, PageSize: 20, Audit: a.Conversation})
	_, body := get(t, h, http.MethodGet, "/sessions/"+chatKey)
	mustContain(t, "intact", body, "the transcripts hold what the chat displays", "(4 messages compared)")
	_, body = get(t, h, http.MethodGet, "/sessions/"+subKey)
	mustContain(t, "no conversation", body, "not audited")
}

// intactDisplay shows exactly what the transcript holds.
type intactDisplay struct{ st Store }

func (d intactDisplay) Read(ctx context.Context, t audit.Target, _ string, _ int) ([]audit.Message, error) {
	es, err := d.st.Tail(ctx, chatKey, 100)
	if err != nil {
		return nil, err
	}
	var out []audit.Message
	for _, e := range transcript.Visible(es) {
		for _, id := range e.MessageIDs {
			out = append(out, audit.Message{ID: id, Conversation: t.ID, Text: e.Text, FromBot: e.Role == transcript.RoleAssistant})
		}
	}
	return out, nil
}
