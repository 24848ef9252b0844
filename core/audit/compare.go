package audit

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/agentbot/agentbot/core/transcript"
)

// Message is a message as the platform displays it now.
type Message struct {
	ID string
	// Conversation is the conversation id it is displayed in (a channel, a
	// thread, a room, a Matrix thread's root event), as entries name it.
	Conversation string
	Author       string // as the chat shows it
	At           time.Time
	Text         string   // the latest edit's text
	Attachments  []string // file names
	Edited       bool
	FromBot      bool // the bot's own, or posted under one of its personas
	// Addressed marks a user message that reaches a session wherever it is
	// posted: it mentions the bot with some text besides, or it is in a DM.
	Addressed bool
}

// Kind is a kind of difference (a metric label: a bounded set).
type Kind string

// Kinds of difference.
const (
	Same Kind = ""
	// Missing: the chat displays a bot message, or a user message
	// addressed to the bot, that no transcript entry holds.
	Missing Kind = "missing"
	// Extra: a transcript entry names a message the chat does not display.
	Extra Kind = "extra"
	// Text: the chat displays other text than the entry holds.
	Text Kind = "text"
	// Order: the entry is out of display order in its session.
	Order Kind = "order"
	// Undeleted: the transcript marks the message deleted; the chat still
	// displays it.
	Undeleted Kind = "undeleted"
)

// Row is one message of the conversation with its transcript entry,
// aligned: what the chat displays, what the transcript holds, and how they
// differ.
type Row struct {
	MessageID string // the message's id (an entry's first part)
	// Messages are the displayed parts (one, or the parts of a split
	// entry that the chat still displays); none when not displayed.
	Messages []Message
	Entry    *transcript.Folded // the entry that holds it; nil when none does
	Diff     Kind
	Detail   string // what differs, in a sentence; "" when Diff is Same
}

// Shown is the text the chat displays for the row (parts concatenated).
func (r Row) Shown() string {
	var b strings.Builder
	for _, m := range r.Messages {
		b.WriteString(m.Text)
	}
	return b.String()
}

// Compare aligns the entries that conversation's chat displays with the
// messages it displays now, oldest first, and marks where they differ.
// entries are the folded entries of every session displayed there (change
// records are skipped); shown is the conversation's messages in display
// order. Rows follow display order; an entry whose messages are not
// displayed comes right after the row of the entry before it.
func Compare(entries []transcript.Folded, shown []Message) []Row {
	pos := make(map[string]int, len(shown))
	for i, m := range shown {
		pos[m.ID] = i
	}
	held := map[string]*transcript.Folded{} // message id -> its entry
	var es []*transcript.Folded
	for i := range entries {
		f := &entries[i]
		if f.IsChange() || len(f.MessageIDs) == 0 {
			continue
		}
		es = append(es, f)
		for _, id := range f.MessageIDs {
			held[id] = f
		}
	}
	rows := make([]Row, 0, len(shown))
	at := map[*transcript.Folded]int{} // entry -> its row
	for _, m := range shown {
		f := held[m.ID]
		switch {
		case f == nil:
			r := Row{MessageID: m.ID, Messages: []Message{m}}
			if m.FromBot || m.Addressed {
				who := "a user message addressed to the bot"
				if m.FromBot {
					who = "a bot message"
				}
				r.Diff, r.Detail = Missing, "the chat displays "+who+" that no transcript holds"
			}
			rows = append(rows, r)
		case at[f] == 0:
			rows = append(rows, Row{MessageID: f.MessageIDs[0], Entry: f})
			at[f] = len(rows)
			fallthrough
		default:
			r := &rows[at[f]-1]
			r.Messages = append(r.Messages, m)
		}
	}
	rows = placeUndisplayed(rows, es, at)
	for i := range rows {
		judge(&rows[i])
	}
	markOrder(rows, pos)
	return rows
}

// placeUndisplayed inserts a row for each entry none of whose messages is
// displayed, after the row of the entry before it (or first).
func placeUndisplayed(rows []Row, es []*transcript.Folded, at map[*transcript.Folded]int) []Row {
	for i, f := range es {
		if at[f] != 0 {
			continue
		}
		after := 0
		for j := i - 1; j >= 0; j-- {
			if at[es[j]] != 0 {
				after = at[es[j]]
				break
			}
		}
		rows = slices.Insert(rows, after, Row{MessageID: f.MessageIDs[0], Entry: f})
		for g, n := range at {
			if n > after {
				at[g] = n + 1
			}
		}
		at[f] = after + 1
	}
	return rows
}

// judge sets a row's difference from its entry and displayed parts.
func judge(r *Row) {
	f := r.Entry
	if f == nil {
		return
	}
	switch {
	case f.Deleted && len(r.Messages) > 0:
		r.Diff, r.Detail = Undeleted, "the transcript marks the message deleted; the chat still displays it"
	case f.Deleted:
	case len(r.Messages) < len(f.MessageIDs):
		r.Diff, r.Detail = Extra, "the transcript holds the message; the chat does not display it"
		if len(r.Messages) > 0 {
			r.Detail = "the transcript holds a part the chat does not display"
		}
	case r.Shown() != f.Latest:
		r.Diff, r.Detail = Text, "the chat displays other text than the transcript holds"
	}
}

// markOrder marks the entries that are out of display order in their
// session: among the bot's entries, and among users' entries (the
// transcript keeps the order in which the bot learnt of messages, so a
// user message crossing a bot send is appended after it). An entry
// appended when recovered after a crash, or reached by an edit that added
// a mention, is not held to it.
func markOrder(rows []Row, pos map[string]int) {
	type lane struct {
		key      string
		fromUser bool
	}
	byLane := map[lane][]int{}
	for i, r := range rows {
		if r.Entry != nil && !r.Entry.Deleted && len(r.Messages) > 0 {
			l := lane{r.Entry.SessionKey, r.Entry.Source == transcript.SourceUser}
			byLane[l] = append(byLane[l], i)
		}
	}
	for _, idx := range byLane {
		slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(rows[a].Entry.Seq, rows[b].Entry.Seq) })
		last := -1
		for _, i := range idx {
			r := &rows[i]
			p := pos[r.Messages[0].ID]
			if p < last && r.Entry.Meta["recovered"] != "true" && r.Entry.Meta["viaEdit"] != "true" && r.Diff == Same {
				r.Diff, r.Detail = Order, "the transcript holds the message after one the chat displays later"
			}
			last = max(last, p)
		}
	}
}

// Differences returns the rows that differ.
func Differences(rows []Row) []Row {
	var out []Row
	for _, r := range rows {
		if r.Diff != Same {
			out = append(out, r)
		}
	}
	return out
}
