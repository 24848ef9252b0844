package audit

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/clock"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/store/memory"
)

// fakeDisplay is a platform's display: messages by conversation, oldest
// first. Like the real readers it honours oldest and limit, and records
// what it was asked.
type fakeDisplay struct {
	msgs  map[string][]Message
	reads []string
	err   error
}

func (d *fakeDisplay) Read(_ context.Context, t Target, oldest string, limit int) ([]Message, error) {
	d.reads = append(d.reads, fmt.Sprintf("%s/%s from %s", t.Parent, t.ID, oldest))
	if d.err != nil {
		return nil, d.err
	}
	all := d.msgs[t.ID]
	start := max(0, len(all)-limit)
	for i := len(all) - 1; i >= start; i-- {
		if all[i].ID == oldest {
			start = i
			break
		}
	}
	return all[start:], nil
}

func world(t *testing.T) (*memory.Store, *transcript.Service) {
	t.Helper()
	st := memory.New()
	return st, transcript.New(transcript.Options{}, transcript.Deps{Store: st})
}

func appendEntry(t *testing.T, ts *transcript.Service, key string, e transcript.Entry) {
	t.Helper()
	if _, err := ts.Append(context.Background(), key, e); err != nil {
		t.Fatal(err)
	}
}

func TestAuditorConversation(t *testing.T) {
	ctx := context.Background()
	st, ts := world(t)
	own := "agent:main:discord:channel:100"
	appendEntry(t, ts, own, transcript.Entry{Role: transcript.RoleUser, Source: transcript.SourceUser, Text: "old", MessageIDs: []string{"1"}})
	appendEntry(t, ts, own, transcript.Entry{Role: transcript.RoleUser, Source: transcript.SourceUser, Text: "hi", MessageIDs: []string{"2"}})
	appendEntry(t, ts, own, transcript.Entry{Role: transcript.RoleAssistant, Source: transcript.SourceTurn, Text: "hello", MessageIDs: []string{"3"},
		Meta: map[string]string{transcript.MetaDisplayedIn: "100"}})
	// A subagent's completion displayed in the channel (named by its meta),
	// and an entry of another channel.
	appendEntry(t, ts, "agent:main:subagent:x", transcript.Entry{Role: transcript.RoleAssistant, Source: transcript.SourceAnnounce, Text: "done",
		MessageIDs: []string{"4"}, Meta: map[string]string{transcript.MetaDisplayedIn: "100"}})
	appendEntry(t, ts, "agent:main:discord:channel:200", transcript.Entry{Role: transcript.RoleUser, Source: transcript.SourceUser, Text: "else", MessageIDs: []string{"9"}})
	d := &fakeDisplay{msgs: map[string][]Message{"100": {
		{ID: "1", Conversation: "100", Text: "old"}, {ID: "2", Conversation: "100", Text: "hi, edited"},
		{ID: "3", Conversation: "100", Text: "hello", FromBot: true}, {ID: "4", Conversation: "100", Text: "done", FromBot: true},
		{ID: "5", Conversation: "100", Text: "unseen", FromBot: true}}}}
	a := New(Options{Window: 10}, Deps{Transcripts: st, Displays: map[string]Display{"discord": d}})
	r, err := a.Conversation(ctx, "100")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(diffs(r.Rows)); got != "[2 text 5 missing]" {
		t.Fatalf("differences %s, want [2 text 5 missing]", got)
	}
	if fmt.Sprint(d.reads) != "[/100 from 1]" {
		t.Fatalf("reads %v, want one read of 100 from its oldest entry's message", d.reads)
	}
	if _, err := a.Conversation(ctx, "300"); !errors.Is(err, ErrUnknownConversation) {
		t.Fatalf("unknown conversation: err %v, want ErrUnknownConversation", err)
	}
}

// TestAuditorWindow: entries older than the messages read are not judged
// (the display read stopped at Options.Messages).
func TestAuditorWindow(t *testing.T) {
	st, ts := world(t)
	key := "agent:main:discord:channel:100"
	var shown []Message
	for i := 1; i <= 6; i++ {
		id := fmt.Sprint(i)
		appendEntry(t, ts, key, transcript.Entry{Source: transcript.SourceTurn, Text: id, MessageIDs: []string{id}, At: time.Unix(int64(i), 0)})
		shown = append(shown, Message{ID: id, Conversation: "100", Text: id, FromBot: true, At: time.Unix(int64(i), 0)})
	}
	a := New(Options{Messages: 3}, Deps{Transcripts: st, Displays: map[string]Display{"discord": &fakeDisplay{msgs: map[string][]Message{"100": shown}}}})
	r, err := a.Conversation(context.Background(), "100")
	if err != nil {
		t.Fatal(err)
	}
	if d := r.Differences(); len(d) != 0 || len(r.Rows) != 3 {
		t.Fatalf("rows %d, differences %+v: want the 3 read, none differing", len(r.Rows), d)
	}
}

func TestAuditorRun(t *testing.T) {
	st, ts := world(t)
	appendEntry(t, ts, "agent:main:discord:channel:100", transcript.Entry{Source: transcript.SourceUser, Text: "hi", MessageIDs: []string{"1"}})
	appendEntry(t, ts, "agent:main:matrix:channel:!r:hs", transcript.Entry{Source: transcript.SourceUser, Text: "yo", MessageIDs: []string{"$1"}})
	d := &fakeDisplay{msgs: map[string][]Message{"100": {{ID: "1", Conversation: "100", Text: "changed"}}}}
	ticks := make(chan time.Time)
	counted := make(chan map[Kind]int, 1)
	got := map[Kind]int{}
	a := New(Options{Every: time.Minute}, Deps{Transcripts: st, Displays: map[string]Display{"discord": d}, Log: zerolog.Nop(),
		Count: func(k Kind, n int) {
			got[k] += n
			if k == Undeleted { // the last kind counted
				counted <- got
			}
		},
		Ticks: func(time.Duration) (<-chan time.Time, func()) { return ticks, func() {} }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- a.Run(ctx) }()
	ticks <- time.Time{}
	c := <-counted
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The Matrix room has no display configured: logged, not counted.
	if c[Text] != 1 || c[Missing] != 0 || c[Extra] != 0 {
		t.Fatalf("counted %v, want one text difference", c)
	}
}

func TestPlatformOf(t *testing.T) {
	for id, want := range map[string]string{"123": "discord", "user:123": "discord", "!r:hs": "matrix", "$ev": "matrix", "user:@u:hs": "matrix"} {
		if got := PlatformOf(id); got != want {
			t.Errorf("PlatformOf(%q) = %s, want %s", id, got, want)
		}
	}
}

// fakeOutbox is the outbox: records newest first, filtered by state like
// the stores.
type fakeOutbox []delivery.Record

func (o fakeOutbox) Deliveries(_ context.Context, state delivery.PendingState, limit int) ([]delivery.Record, error) {
	var out []delivery.Record
	for _, r := range o {
		if (state == "" || r.State == state) && (limit == 0 || len(out) < limit) {
			out = append(out, r)
		}
	}
	return out, nil
}

// TestAuditorExcusesInFlightAndExceptions: a reply still streaming (its
// entry comes when it ends), a Rule 1 exception and a bot message
// confirmed a moment ago are displayed with no entry, and are not
// differences; a failed delivery's stray message is.
func TestAuditorExcusesInFlightAndExceptions(t *testing.T) {
	st, ts := world(t)
	appendEntry(t, ts, "agent:main:discord:channel:100", transcript.Entry{Source: transcript.SourceUser, Text: "hi", MessageIDs: []string{"1"}})
	bot := func(id string) Message { return Message{ID: id, Conversation: "100", Text: id, FromBot: true} }
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	recent := bot("5")
	recent.At = now.Add(-time.Second)
	d := &fakeDisplay{msgs: map[string][]Message{"100": {{ID: "1", Conversation: "100", Text: "hi"}, bot("2"), bot("3"), bot("4"), recent}}}
	out := fakeOutbox{
		{State: delivery.StateSent, MessageIDs: []string{"2"}},
		{State: delivery.StateDelivered, Reason: delivery.SkipOtherAgent, MessageIDs: []string{"3"}},
		{State: delivery.StateFailed, MessageIDs: []string{"4"}},
	}
	r, err := New(Options{}, Deps{Transcripts: st, Displays: map[string]Display{"discord": d}, Outbox: out, Clock: clock.NewFake(now)}).
		Conversation(context.Background(), "100")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(diffs(r.Rows)); got != "[4 missing]" {
		t.Fatalf("differences %s, want [4 missing]", got)
	}
}
