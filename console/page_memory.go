package console

import (
	"context"
	"net/http"
	"strings"

	"github.com/agentbot/agentbot/core/memory"
	"github.com/agentbot/agentbot/core/notes"
)

// NoteLister lists every note (memory's notes; the store's records).
type NoteLister interface {
	AllNotes(ctx context.Context) ([]notes.Note, error)
}

// Searcher is recall over every conversation's transcript: the console's
// reader already sees every transcript (the http.token is the bot
// operator's), so the Memory page searches them all, and never more.
type Searcher interface {
	SearchAll(ctx context.Context, text string, limit int) ([]memory.Found, error)
}

// memoryShown bounds the Memory page's hits.
const memoryShown = 20

type memoryPage struct {
	base
	Off   bool
	Query string
	Rows  []memoryRow
	// Notes are the notes per scope (me, here, server), newest first;
	// NotesOff when the page has no note lister.
	Notes    []noteGroup
	NotesOff bool
}

type noteGroup struct {
	Scope string
	Rows  []noteRow
}

type noteRow struct {
	ID, Text, Author, About, Place, Key, Server, Message, At string
}

type memoryRow struct {
	At, Place, Key, Author, Snippet, Message string
}

// memory is the Memory page: a GET search box over the recall index.
func (c *Console) memory(r *http.Request) (any, error) {
	p := memoryPage{base: c.base("memory", "Memory"), Off: c.o.Memory == nil, Query: strings.TrimSpace(r.URL.Query().Get("q")), NotesOff: c.o.Notes == nil}
	if !p.NotesOff {
		var err error
		if p.Notes, err = c.noteGroups(r.Context()); err != nil {
			return nil, err
		}
	}
	if p.Off || p.Query == "" {
		return p, nil
	}
	fs, err := c.o.Memory.SearchAll(r.Context(), p.Query, memoryShown)
	if err != nil {
		return nil, err
	}
	for _, f := range fs {
		author := f.Doc.Author
		if author == "" {
			author = string(f.Doc.Role)
		}
		p.Rows = append(p.Rows, memoryRow{At: c.fmtTime(f.Doc.At), Place: memory.Place(f.Conversation), Key: f.Doc.Key,
			Author: author, Snippet: f.Snippet, Message: f.Doc.MessageID})
	}
	return p, nil
}

// noteGroups are every note by scope, newest first in each.
func (c *Console) noteGroups(ctx context.Context) ([]noteGroup, error) {
	ns, err := c.o.Notes.AllNotes(ctx)
	if err != nil {
		return nil, err
	}
	groups := []noteGroup{{Scope: string(notes.ScopeMe)}, {Scope: string(notes.ScopeHere)}, {Scope: string(notes.ScopeServer)}}
	for i := len(ns) - 1; i >= 0; i-- {
		n := ns[i]
		row := noteRow{ID: n.ID, Text: n.Text, Author: n.Author, About: n.About, Place: memory.Place(n.Conversation), Key: n.SessionKey,
			Server: n.Server, At: c.fmtTime(n.At)}
		if len(n.MessageIDs) > 0 {
			row.Message = n.MessageIDs[0]
		}
		for g := range groups {
			if groups[g].Scope == string(n.Scope) {
				groups[g].Rows = append(groups[g].Rows, row)
			}
		}
	}
	return groups, nil
}
