package console

import (
	"context"
	"net/http"
	"strings"

	"github.com/agentbot/agentbot/core/memory"
)

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
}

type memoryRow struct {
	At, Place, Key, Author, Snippet, Message string
}

// memory is the Memory page: a GET search box over the recall index.
func (c *Console) memory(r *http.Request) (any, error) {
	p := memoryPage{base: c.base("memory", "Memory"), Off: c.o.Memory == nil, Query: strings.TrimSpace(r.URL.Query().Get("q"))}
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
