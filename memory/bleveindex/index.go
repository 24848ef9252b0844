package bleveindex

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"

	recall "github.com/agentbot/agentbot/core/memory"
	"github.com/agentbot/agentbot/core/transcript"
)

var _ recall.Index = (*Index)(nil)

// Dir is where the index of the store file storePath lives: beside it,
// named after it ("bot.db" -> "bot.db.recall").
func Dir(storePath string) string { return storePath + ".recall" }

var keyBuilt = []byte("built")

// Index is a bleve index in one directory. Safe for concurrent use.
type Index struct {
	dir string

	mu     sync.RWMutex // Reset swaps idx
	idx    bleve.Index
	closed bool
}

// Open opens the index in dir, creating it when absent.
func Open(dir string) (*Index, error) {
	idx, err := open(dir)
	if err != nil {
		return nil, err
	}
	return &Index{dir: dir, idx: idx}, nil
}

func open(dir string) (bleve.Index, error) {
	idx, err := bleve.Open(dir)
	if errors.Is(err, bleve.ErrorIndexPathDoesNotExist) {
		idx, err = bleve.NewUsing(dir, newMapping(), scorch.Name, scorch.Name, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("recall index %s: %w", dir, err)
	}
	return idx, nil
}

// Close closes the index; closing it again does nothing.
func (x *Index) Close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return nil
	}
	x.closed = true
	return x.idx.Close()
}

func newMapping() mapping.IndexMapping {
	field := func(f *mapping.FieldMapping, index, store, docValues bool) *mapping.FieldMapping {
		f.Index, f.Store, f.DocValues, f.IncludeInAll, f.IncludeTermVectors = index, store, docValues, false, false
		return f
	}
	dm := bleve.NewDocumentStaticMapping()
	dm.AddFieldMappingsAt("key", field(bleve.NewKeywordFieldMapping(), true, true, false))
	dm.AddFieldMappingsAt("text", field(bleve.NewTextFieldMapping(), true, true, false))
	dm.AddFieldMappingsAt("at", field(bleve.NewDateTimeFieldMapping(), false, true, false))
	for _, f := range []string{"seq", "role", "author", "msg"} {
		dm.AddFieldMappingsAt(f, field(bleve.NewKeywordFieldMapping(), false, true, false))
	}
	m := bleve.NewIndexMapping()
	m.DefaultMapping = dm
	m.IndexDynamic, m.StoreDynamic, m.DocValuesDynamic = false, false, false
	return m
}

type doc struct {
	Key    string    `json:"key"`
	Text   string    `json:"text"`
	At     time.Time `json:"at"`
	Seq    string    `json:"seq"`
	Role   string    `json:"role"`
	Author string    `json:"author"`
	Msg    string    `json:"msg"`
}

// Apply indexes and deletes ups in one persisted batch.
func (x *Index) Apply(ctx context.Context, ups []recall.Update) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	b := x.idx.NewBatch()
	for _, u := range ups {
		d := u.Doc
		if u.Delete {
			b.Delete(d.ID())
			continue
		}
		if err := b.Index(d.ID(), doc{Key: d.Key, Text: d.Text, At: d.At, Seq: strconv.FormatUint(d.Seq, 10),
			Role: string(d.Role), Author: d.Author, Msg: d.MessageID}); err != nil {
			return fmt.Errorf("recall index: %s: %w", d.ID(), err)
		}
	}
	if err := x.idx.Batch(b); err != nil {
		return fmt.Errorf("recall index: batch: %w", err)
	}
	return nil
}

// Search matches any word of q.Text among the documents of q.Keys, best
// first, newest first among equals.
//
// The view is usually a small part of the index, and a filter of many
// session-key terms costs more than the words: so when the words have few
// matches in the whole index (their postings counted first), all of them
// are fetched and filtered here; otherwise the view is a filter in the
// index. Ties are ordered newest first among the visible hits found.
func (x *Index) Search(ctx context.Context, q recall.Query) ([]recall.Hit, error) {
	if len(q.Keys) == 0 || q.Limit <= 0 {
		return nil, nil
	}
	view := make(map[string]bool, len(q.Keys))
	for _, k := range q.Keys {
		view[k] = true
	}
	match := bleve.NewMatchQuery(q.Text)
	match.SetField("text")
	x.mu.RLock()
	defer x.mu.RUnlock()
	n, err := x.matches(ctx, q.Text)
	if err != nil {
		return nil, err
	}
	var (
		req    *bleve.SearchRequest
		scores map[string]float64 // the words' scores of the visible matches, when fetched first
		res    *bleve.SearchResult
	)
	if few := uint64(max(500*q.Limit, 5000)); n <= few {
		if res, err = x.idx.SearchInContext(ctx, bleve.NewSearchRequestOptions(match, int(few), 0, false)); err != nil {
			return nil, fmt.Errorf("recall index: search: %w", err)
		}
		scores = map[string]float64{}
		for _, h := range res.Hits {
			if key, _, ok := cutDocID(h.ID); ok && view[key] {
				scores[h.ID] = h.Score
			}
		}
		if len(scores) == 0 {
			return nil, nil
		}
		req = bleve.NewSearchRequestOptions(bleve.NewDocIDQuery(slices.Collect(maps.Keys(scores))), len(scores), 0, false)
	} else {
		keys := make([]query.Query, len(q.Keys))
		for i, k := range q.Keys {
			t := bleve.NewTermQuery(k)
			t.SetField("key")
			keys[i] = t
		}
		req = bleve.NewSearchRequestOptions(bleve.NewConjunctionQuery(match, bleve.NewDisjunctionQuery(keys...)), max(3*q.Limit, 30), 0, false)
	}
	req.Fields = []string{"key", "seq", "role", "author", "msg", "at", "text"}
	res, err = x.idx.SearchInContext(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("recall index: search: %w", err)
	}
	out := make([]recall.Hit, 0, len(res.Hits))
	for _, h := range res.Hits {
		d, err := hitDoc(h)
		if err != nil {
			return nil, err
		}
		score := h.Score
		if scores != nil {
			score = scores[h.ID]
		}
		out = append(out, recall.Hit{Doc: d, Score: score})
	}
	slices.SortStableFunc(out, func(a, b recall.Hit) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return b.Doc.At.Compare(a.Doc.At)
	})
	return out[:min(len(out), q.Limit)], nil
}

// matches counts the postings of q's words in the text field: an upper
// bound of the documents a match query finds.
func (x *Index) matches(ctx context.Context, text string) (uint64, error) {
	m := x.idx.Mapping()
	a := m.AnalyzerNamed(m.AnalyzerNameForPath("text"))
	if a == nil {
		return math.MaxUint64, nil
	}
	adv, err := x.idx.Advanced()
	if err != nil {
		return 0, fmt.Errorf("recall index: %w", err)
	}
	r, err := adv.Reader()
	if err != nil {
		return 0, fmt.Errorf("recall index: %w", err)
	}
	defer r.Close() //nolint:errcheck // a snapshot reader
	var n uint64
	seen := map[string]bool{}
	for _, tok := range a.Analyze([]byte(text)) {
		if seen[string(tok.Term)] {
			continue
		}
		seen[string(tok.Term)] = true
		tfr, err := r.TermFieldReader(ctx, tok.Term, "text", false, false, false)
		if err != nil {
			return 0, fmt.Errorf("recall index: %w", err)
		}
		n += tfr.Count()
		_ = tfr.Close()
	}
	return n, nil
}

// cutDocID splits a document id (recall.DocID) into session key and seq.
func cutDocID(id string) (key string, seq uint64, ok bool) {
	i := strings.LastIndexByte(id, '#')
	if i < 0 {
		return "", 0, false
	}
	seq, err := strconv.ParseUint(id[i+1:], 10, 64)
	return id[:i], seq, err == nil
}

func hitDoc(h *search.DocumentMatch) (recall.Doc, error) {
	str := func(f string) string { s, _ := h.Fields[f].(string); return s }
	seq, err := strconv.ParseUint(str("seq"), 10, 64)
	if err != nil {
		return recall.Doc{}, fmt.Errorf("recall index: document %s has no seq", h.ID)
	}
	at, _ := time.Parse(time.RFC3339Nano, str("at"))
	return recall.Doc{Key: str("key"), Seq: seq, Text: str("text"), Role: transcript.Role(str("role")), Author: str("author"), MessageID: str("msg"), At: at}, nil
}

// Built reports whether a full build completed since the last Reset.
func (x *Index) Built(context.Context) (bool, error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	v, err := x.idx.GetInternal(keyBuilt)
	if err != nil {
		return false, fmt.Errorf("recall index: %w", err)
	}
	return len(v) > 0, nil
}

// SetBuilt records that a full build completed.
func (x *Index) SetBuilt(context.Context) error {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if err := x.idx.SetInternal(keyBuilt, []byte("1")); err != nil {
		return fmt.Errorf("recall index: %w", err)
	}
	return nil
}

// Reset removes the index's directory and starts an empty index there.
func (x *Index) Reset(context.Context) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.idx.Close(); err != nil {
		return fmt.Errorf("recall index: close for reset: %w", err)
	}
	if err := os.RemoveAll(x.dir); err != nil {
		return fmt.Errorf("recall index: remove %s: %w", x.dir, err)
	}
	idx, err := open(x.dir)
	if err != nil {
		return err
	}
	x.idx = idx
	return nil
}

// Stats counts the documents and the bytes of the index's files.
func (x *Index) Stats(context.Context) (recall.Stats, error) {
	x.mu.RLock()
	n, err := x.idx.DocCount()
	x.mu.RUnlock()
	if err != nil {
		return recall.Stats{}, fmt.Errorf("recall index: %w", err)
	}
	var size int64
	err = filepath.WalkDir(x.dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if info, err := d.Info(); err == nil {
			size += info.Size()
		}
		return nil
	})
	if err != nil {
		return recall.Stats{}, fmt.Errorf("recall index: size of %s: %w", x.dir, err)
	}
	return recall.Stats{Docs: n, Bytes: size}, nil
}

// Remove deletes the index directory of a bot whose memory is off:
// nothing derived from the transcripts is kept then.
func Remove(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("recall index: remove %s: %w", dir, err)
	}
	return nil
}
