package audit

import (
	"fmt"
	"testing"

	"github.com/agentbot/agentbot/core/transcript"
)

// ent is a folded entry of session "s" holding message ids.
func ent(seq uint64, src transcript.Source, text string, ids ...string) transcript.Entry {
	return transcript.Entry{Seq: seq, SessionKey: "s", Source: src, Text: text, MessageIDs: ids}
}

func msg(id, text string, fromBot bool) Message {
	return Message{ID: id, Conversation: "c", Text: text, FromBot: fromBot}
}

// diffs renders the differing rows as "id kind".
func diffs(rows []Row) []string {
	var out []string
	for _, r := range Differences(rows) {
		out = append(out, fmt.Sprintf("%s %s", r.MessageID, r.Diff))
	}
	return out
}

func TestCompare(t *testing.T) {
	userAddressed := Message{ID: "9", Conversation: "c", Text: "@bot hi", Addressed: true}
	tests := []struct {
		name    string
		entries []transcript.Entry
		shown   []Message
		want    []string
		rows    int
	}{
		{"intact", []transcript.Entry{ent(1, transcript.SourceUser, "hi", "1"), ent(2, transcript.SourceTurn, "hello", "2")},
			[]Message{msg("1", "hi", false), msg("2", "hello", true)}, nil, 2},
		{"split reply is one row", []transcript.Entry{ent(1, transcript.SourceTurn, "ab", "1", "2")},
			[]Message{msg("1", "a", true), msg("2", "b", true)}, nil, 1},
		{"edited behind the bot's back", []transcript.Entry{ent(1, transcript.SourceUser, "hi", "1")},
			[]Message{msg("1", "hi there", false)}, []string{"1 text"}, 1},
		{"edit recorded", []transcript.Entry{ent(1, transcript.SourceUser, "hi", "1"),
			{Seq: 2, SessionKey: "s", Source: transcript.SourceEdit, Text: "hi there", Target: 1}},
			[]Message{msg("1", "hi there", false)}, nil, 1},
		{"bot message no transcript holds", nil, []Message{msg("1", "hello", true)}, []string{"1 missing"}, 1},
		{"addressed user message no transcript holds", nil, []Message{userAddressed}, []string{"9 missing"}, 1},
		{"unaddressed user message is context", nil, []Message{msg("1", "chatter", false)}, nil, 1},
		{"deleted behind the bot's back", []transcript.Entry{ent(1, transcript.SourceUser, "hi", "1"), ent(2, transcript.SourceTurn, "yo", "2")},
			[]Message{msg("2", "yo", true)}, []string{"1 extra"}, 2},
		{"a part gone", []transcript.Entry{ent(1, transcript.SourceTurn, "ab", "1", "2")},
			[]Message{msg("1", "a", true)}, []string{"1 extra"}, 1},
		{"deletion recorded, message gone", []transcript.Entry{{Seq: 1, SessionKey: "s", Source: transcript.SourceUser, MessageIDs: []string{"1"}, Deleted: true}},
			nil, nil, 1},
		{"deletion recorded, message still shown", []transcript.Entry{{Seq: 1, SessionKey: "s", Source: transcript.SourceUser, MessageIDs: []string{"1"}, Deleted: true}},
			[]Message{msg("1", "hi", false)}, []string{"1 undeleted"}, 1},
		{"bot entries out of display order", []transcript.Entry{ent(1, transcript.SourceTurn, "b", "2"), ent(2, transcript.SourceTurn, "a", "1")},
			[]Message{msg("1", "a", true), msg("2", "b", true)}, []string{"1 order"}, 2},
		{"a user message crossing a bot send is in order", []transcript.Entry{ent(1, transcript.SourceTurn, "b", "2"), ent(2, transcript.SourceUser, "a", "1")},
			[]Message{msg("1", "a", false), msg("2", "b", true)}, nil, 2},
		{"a recovered entry is not held to order", []transcript.Entry{ent(1, transcript.SourceTurn, "b", "2"),
			{Seq: 2, SessionKey: "s", Source: transcript.SourceTurn, Text: "a", MessageIDs: []string{"1"}, Meta: map[string]string{"recovered": "true"}}},
			[]Message{msg("1", "a", true), msg("2", "b", true)}, nil, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows := Compare(transcript.Fold(tt.entries), tt.shown)
			if got := diffs(rows); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("differences = %v, want %v", got, tt.want)
			}
			if len(rows) != tt.rows {
				t.Errorf("%d rows, want %d: %+v", len(rows), tt.rows, rows)
			}
		})
	}
}

// TestCompareAlignsUndisplayed: an entry whose message is gone sits after
// the entry before it, so the column reads in conversation order.
func TestCompareAlignsUndisplayed(t *testing.T) {
	entries := []transcript.Entry{ent(1, transcript.SourceUser, "a", "1"), ent(2, transcript.SourceTurn, "b", "2"), ent(3, transcript.SourceUser, "c", "3")}
	rows := Compare(transcript.Fold(entries), []Message{msg("1", "a", false), msg("3", "c", false), msg("4", "d", false)})
	var order []string
	for _, r := range rows {
		order = append(order, r.MessageID)
	}
	if fmt.Sprint(order) != "[1 2 3 4]" {
		t.Fatalf("rows in order %v, want [1 2 3 4]", order)
	}
	if rows[1].Entry == nil || rows[1].Entry.Seq != 2 || rows[1].Diff != Extra {
		t.Fatalf("row 2 = %+v, want entry #2 marked extra", rows[1])
	}
}
