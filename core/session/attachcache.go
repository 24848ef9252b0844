package session

import (
	"container/list"
	"context"
	"strconv"
	"strings"
	"sync"

	"github.com/agentbot/agentbot/core/transcript"
)

// Attachment cost bounds (invariant 20, issue 26.7): an attachment is
// fetched once, not once per turn whose history holds it, and one model
// request carries a bounded number of attachment bytes.
const (
	// DefaultAttachmentCacheBytes caps the fetched attachments kept in
	// memory (least recently used dropped first).
	DefaultAttachmentCacheBytes = 64 << 20
	// DefaultRequestAttachmentBytes caps the attachment bytes (images and
	// inlined files) of one model request; the newest messages' go first.
	DefaultRequestAttachmentBytes = 8 << 20
)

// attachCache keeps fetched attachments by attachment (its URL without
// the query, which on Discord is a signature that changes), with a total
// size cap. A failed fetch is kept too (as an empty entry), so a file that
// could not be fetched is not fetched again each turn. Concurrent turns
// asking for the same attachment share one fetch.
type attachCache struct {
	max int64

	mu       sync.Mutex
	size     int64
	lru      *list.List // of *attachEntry, most recent first
	byKey    map[string]*list.Element
	inflight map[string]chan struct{}
}

type attachEntry struct {
	key  string
	data []byte
	err  error
}

func newAttachCache(max int64) *attachCache {
	return &attachCache{max: max, lru: list.New(), byKey: map[string]*list.Element{}, inflight: map[string]chan struct{}{}}
}

func attachKey(a transcript.Attachment, max int64) string {
	u, _, _ := strings.Cut(a.URL, "?")
	return u + "#" + strconv.FormatInt(max, 10)
}

// get returns the attachment's bytes, fetching them with fetch only if no
// earlier call did.
func (c *attachCache) get(ctx context.Context, a transcript.Attachment, max int64, fetch func() ([]byte, error)) ([]byte, error) {
	key := attachKey(a, max)
	for {
		c.mu.Lock()
		if el, ok := c.byKey[key]; ok {
			c.lru.MoveToFront(el)
			e := el.Value.(*attachEntry)
			c.mu.Unlock()
			return e.data, e.err
		}
		wait, busy := c.inflight[key]
		if !busy {
			done := make(chan struct{})
			c.inflight[key] = done
			c.mu.Unlock()
			data, err := fetch()
			c.mu.Lock()
			delete(c.inflight, key)
			if ctx.Err() == nil { // a cancelled turn's failure says nothing of the file
				c.put(&attachEntry{key: key, data: data, err: err})
			}
			c.mu.Unlock()
			close(done)
			return data, err
		}
		c.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// put adds e and drops the least recently used entries over the cap
// (an entry larger than the cap is not kept). Called with mu held.
func (c *attachCache) put(e *attachEntry) {
	n := int64(len(e.data))
	if n > c.max {
		return
	}
	c.byKey[e.key] = c.lru.PushFront(e)
	c.size += n
	for c.size > c.max {
		last := c.lru.Back()
		old := last.Value.(*attachEntry)
		c.lru.Remove(last)
		delete(c.byKey, old.key)
		c.size -= int64(len(old.data))
	}
}
