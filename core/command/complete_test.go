package command

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/scheduler"
)

func values(cs []Choice) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Value
	}
	return out
}

// TestComplete: each completable option lists what its command would
// accept from this invoker, and nothing the command would refuse them.
func TestComplete(t *testing.T) {
	other := session.Info{Key: "agent:main:subagent:2", AgentID: "main", Kind: session.KindSubagent, Label: "theirs", Requester: channel, SpawnedBy: "u2", Status: session.StatusRunning}
	mainInfo := session.Info{Key: mainKey, AgentID: "main", Kind: session.KindMain, Requester: channel}
	theirDM := session.Info{Key: "agent:main:test:dm:u2", AgentID: "main", Kind: session.KindMain, Requester: ref("user:u2", "")}
	jobRun := session.Info{Key: "agent:main:cron:j1:run:r1", AgentID: "main", Kind: session.KindJobRun}
	jobs := []scheduler.Job{{ID: "j1", Name: "daily report"}, {ID: "j2", Name: "weekly"}}
	tests := []struct {
		name, cmd, sub, option, typed, user string
		want                                []string
	}{
		{"focus: own subagent first, never a refused DM nor a job run", "focus", "", "target", "", "u1", []string{subKey, other.Key, mainKey}},
		{"focus: typed filters by name or value", "focus", "", "target", "THEIRS", "u1", []string{other.Key}},
		{"focus: external agents only for who may start them", "focus", "", "target", "acp", "op", []string{"acp:coder"}},
		{"focus: no external agent for others", "focus", "", "target", "acp", "u1", nil},
		{"stop: only one's own run", "stop", "", "target", "", "u1", []string{subKey}},
		{"stop: an operator stops any", "stop", "", "target", "", "op", []string{subKey, other.Key}},
		{"cron remove: nothing for a non-operator", "cron", "remove", "id", "", "u1", nil},
		{"cron run: an operator's jobs, by name", "cron", "run", "id", "daily", "op", []string{"j1"}},
		{"cron runs: the jobs one may see", "cron", "runs", "id", "", "u1", []string{"j1", "j2"}},
		{"spawn agent: agents for everyone", "spawn", "", "agent", "", "u1", []string{"main", "scribe"}},
		{"spawn agent: and external ones for who may", "spawn", "", "agent", "", "op", []string{"main", "scribe", "coder"}},
		{"spawn agent: by name", "spawn", "", "agent", "scr", "u1", []string{"scribe"}},
		{"session: a typed duration first", "session", "idle", "duration", "2h", "u1", []string{"2h", "12h", "72h"}},
		{"session: the usual ones", "session", "max-age", "duration", "", "u1", durations},
		{"an option not completed", "cron", "add", "schedule", "", "op", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld()
			w.auth.refuseFocus = theirDM.Key
			w.sessions.infos = []session.Info{mainInfo, theirDM, jobRun, other, sub}
			w.sessions.running = map[string]session.Run{subKey: {Key: subKey, Owner: "u1"}, other.Key: {Key: other.Key, Owner: "u2"}}
			w.jobs.jobs = jobs
			v := Invocation{Platform: discordWords, Conversation: channel, UserID: tc.user, Name: tc.cmd, Sub: tc.sub}
			got := values(w.commands().Complete(context.Background(), v, tc.option, tc.typed))
			if !slices.Equal(got, tc.want) {
				t.Fatalf("Complete = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestCompleteLimits: at most 25 choices; names cut to 100 characters; a
// session whose key is too long to pick is offered by its label, and not
// at all without one; the authority checks one answer makes are bounded.
func TestCompleteLimits(t *testing.T) {
	w := newWorld()
	for i := range 30 {
		w.jobs.jobs = append(w.jobs.jobs, scheduler.Job{ID: fmt.Sprintf("j%02d", i), Name: strings.Repeat("n", 120)})
	}
	long := "agent:main:matrix:channel:!" + strings.Repeat("r", 90) + ":example.org/$event"
	w.sessions.infos = []session.Info{
		{Key: long, AgentID: "main", Kind: session.KindSubagent, Label: "short", SpawnedBy: "u1"},
		{Key: long + "2", AgentID: "main", Kind: session.KindSubagent, SpawnedBy: "u1"},
	}
	v := Invocation{Platform: discordWords, Conversation: channel, UserID: "op", Name: "cron", Sub: "remove"}
	got := w.commands().Complete(context.Background(), v, "id", "")
	if len(got) != MaxChoices {
		t.Fatalf("%d choices, want %d", len(got), MaxChoices)
	}
	for _, c := range got {
		if n := utf8.RuneCountInString(c.Name); n > MaxChoiceLen || n == 0 {
			t.Fatalf("choice name of %d characters", n)
		}
	}
	v = Invocation{Platform: discordWords, Conversation: channel, UserID: "u1", Name: "focus"}
	if got := values(w.commands().Complete(context.Background(), v, "target", "")); !slices.Equal(got, []string{"short"}) {
		t.Fatalf("long keys offered as %q, want only the label", got)
	}

	w = newWorld()
	for i := range 3 * maxChecks {
		w.sessions.infos = append(w.sessions.infos, session.Info{Key: fmt.Sprintf("agent:main:subagent:%d", i), Kind: session.KindSubagent, Label: "x"})
	}
	w.auth.refuseFocus = "*" // every candidate matches and is refused
	got = w.commands().Complete(context.Background(), Invocation{Platform: discordWords, Conversation: channel, UserID: "u1", Name: "focus"}, "target", "")
	if len(got) != 0 {
		t.Fatalf("refused sessions offered: %+v", got)
	}
	if n := len(w.auth.asked); n != maxChecks {
		t.Fatalf("one answer asked the authority %d times, want %d", n, maxChecks)
	}
}

// TestHelpListsWhatCompletes: help lists the commands with the values
// their options take, the same lists as autocomplete; said in public (a
// Matrix room) it names only this room's jobs and sessions, never those of
// elsewhere the invoker may also reach.
func TestHelpListsWhatCompletes(t *testing.T) {
	room := matrixWords
	room.PublicReplies = true
	elsewhere := ref("chan-2", "")
	w := newWorld()
	w.sessions.infos = []session.Info{
		{Key: mainKey, AgentID: "main", Kind: session.KindMain, Requester: channel},
		{Key: "agent:main:test:channel:chan-2", AgentID: "main", Kind: session.KindMain, Requester: elsewhere},
	}
	w.jobs.jobs = []scheduler.Job{
		{ID: "here1", Name: "here", CreatedIn: channel, Target: scheduler.TargetMain},
		{ID: "there1", Name: "there", CreatedIn: elsewhere, Target: scheduler.TargetMain},
	}
	r, err := w.commands().Run(context.Background(), Invocation{Platform: room, Conversation: channel, UserID: "op", Name: "help"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"!focus target — target: `acp:coder` (coder · external coding agent), `" + mainKey + "` (main · this conversation)", "!cron remove|run id — id: `here1`", "!spawn task [label] [agent] [thread] — agent: `main` (Assistant (main)), `scribe` (Scribe (scribe)), `coder`",
		"!session idle|max-age [duration] · !session unbind — duration: `off`"} {
		if !strings.Contains(r.Text, want) {
			t.Errorf("help lacks %q:\n%s", want, r.Text)
		}
	}
	if strings.Contains(r.Text, "chan-2") || strings.Contains(r.Text, "there1") || !r.Public {
		t.Fatalf("public help names another conversation's session or job (or is not public):\n%s", r.Text)
	}
	// Said to the invoker alone, it lists all they may use.
	r, _ = w.commands().Run(context.Background(), Invocation{Platform: discordWords, Conversation: channel, UserID: "op", Name: "help"})
	if !strings.Contains(r.Text, "there1") || r.Public {
		t.Fatalf("private help:\n%s", r.Text)
	}
}
