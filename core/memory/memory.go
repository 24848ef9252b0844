package memory

import (
	"context"
	"strconv"
	"time"

	"github.com/agentbot/agentbot/core/transcript"
)

// Change says that entry Seq of session Key changed: it was appended, or
// erased. Pos orders changes and names one for Done.
type Change struct {
	Pos uint64
	Key string
	Seq uint64
}

// Feed is a store's durable queue of transcript changes, written in the
// same transaction as the change itself.
type Feed interface {
	// Pending returns up to limit queued changes, oldest first.
	Pending(ctx context.Context, limit int) ([]Change, error)
	// Done removes the changes at positions from the queue.
	Done(ctx context.Context, positions []uint64) error
}

// Doc is one searchable entry: the latest text a conversation displayed
// for one transcript entry.
type Doc struct {
	Key    string // session key
	Seq    uint64 // the entry's seq
	Role   transcript.Role
	Author string
	Text   string
	At     time.Time
	// MessageID is the entry's first platform message id ("" for none).
	MessageID string
}

// ID is the document's identity in an index: session key and seq.
func (d Doc) ID() string { return DocID(d.Key, d.Seq) }

// DocID is the identity of entry seq of session key.
func DocID(key string, seq uint64) string { return key + "#" + strconv.FormatUint(seq, 10) }

// Update is one step of an index batch: put Doc, or with Delete remove the
// document of Key/Seq.
type Update struct {
	Delete bool
	Doc    Doc
}

// Query is a search.
type Query struct {
	Text string
	// Keys are the session keys that may match; none matches nothing.
	Keys  []string
	Limit int
}

// Hit is a found document with its snippet (a short excerpt around the match).
type Hit struct {
	Doc     Doc
	Snippet string
	Score   float64
}

// Stats describe an index for `bot doctor`.
type Stats struct {
	Docs  uint64
	Bytes int64
}

// Index is a full-text index of Docs. Implementations: memory/bleve (next
// to the bbolt store) and store/postgres (the database's own text search).
type Index interface {
	// Apply makes the index hold ups, durably, before it returns.
	Apply(ctx context.Context, ups []Update) error
	// Search returns up to q.Limit hits among q.Keys, best first; among
	// equal scores, newest first.
	Search(ctx context.Context, q Query) ([]Hit, error)
	// Built reports whether a full build completed since the last Reset.
	Built(ctx context.Context) (bool, error)
	// SetBuilt records that a full build completed.
	SetBuilt(ctx context.Context) error
	// Reset removes every document and the built mark.
	Reset(ctx context.Context) error
	Stats(ctx context.Context) (Stats, error)
}
