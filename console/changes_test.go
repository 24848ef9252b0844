package console

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/transcript"
)

// TestConversationShowsEditsAndDeletions: the console shows an edited
// entry's final text marked edited, and a deleted one as "(deleted)"
// without its text; the change records are folded into them (the
// transcript fold), not rows of their own.
func TestConversationShowsEditsAndDeletions(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	tr := transcript.New(transcript.Options{}, transcript.Deps{Store: st, Clock: clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))})
	key := "agent:main:discord:channel:55"
	for i, text := range []string{"frist question", "gone-secret-q9"} {
		if _, err := tr.Append(ctx, key, transcript.Entry{Role: transcript.RoleUser, Author: "alice", Text: text,
			MessageIDs: []string{[]string{"501", "502"}[i]}, Source: transcript.SourceUser}); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := tr.Edit(ctx, "501", "t1", "first question"); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if ok, err := tr.Delete(ctx, "502"); err != nil || !ok {
		t.Fatal(ok, err)
	}
	code, body := get(t, newTestConsole(t, st, ""), http.MethodGet, "/sessions/"+key)
	if code != http.StatusOK {
		t.Fatalf("GET = %d\n%s", code, body)
	}
	mustContain(t, "conversation", body, `<div class="text">first question</div>`, `<span class="pill">edited</span>`, "(deleted)")
	if strings.Contains(body, "gone-secret-q9") {
		t.Error("the console shows a deleted message's text")
	}
	if strings.Contains(body, "frist") || strings.Contains(body, "#3 ") || strings.Contains(body, "#4 ") {
		t.Error("the console shows a change record as a message, or an edited entry's old text")
	}
}
