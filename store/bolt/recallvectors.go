package bolt

import (
	"bytes"
	"cmp"
	"container/heap"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

	"go.etcd.io/bbolt"

	recall "github.com/agentbot/agentbot/core/memory"
	"github.com/agentbot/agentbot/core/transcript"
)

// Recall's embedding vectors (recall.Vectors), kept in the store file
// under bucketMemVectors: "vec" holds one unit vector per document, keyed
// by session key, NUL, seq (a session's documents are one range), "todo"
// the documents waiting for one, "meta" the model.
//
// Invariants: a vector is kept only for a document's current text (a put
// of other text drops it and queues the document; a delete drops vector
// and queued text: deleted text is not kept here either); Nearest is
// exact, cosine similarity over every vector of the keys searched, so the
// view is applied before the limit. The buckets are created by the first
// write (recall.embeddings off: none exist, or DropRecallVectors removed
// them).

var bucketMemVectors = []byte("memory_vectors")

var (
	bucketVec   = []byte("vec")
	bucketTodo  = []byte("todo")
	bucketVMeta = []byte("meta")
	keyModel    = []byte("model")
)

var _ recall.Vectors = RecallVectors{}

// RecallVectors is recall's vectors in the store file.
type RecallVectors struct{ s *Store }

// RecallVectors returns the recall vectors kept in the store file.
func (s *Store) RecallVectors() RecallVectors { return RecallVectors{s} }

// DropRecallVectors removes every vector (recall.embeddings is off).
func (s *Store) DropRecallVectors(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.commit.do(func(tx *bbolt.Tx) error {
		if tx.Bucket(bucketMemVectors) == nil {
			return nil
		}
		return tx.DeleteBucket(bucketMemVectors)
	})
}

// vbuckets returns the sub-buckets, creating them in a writable tx; in a
// read-only one before the first write they are nil.
func vbuckets(tx *bbolt.Tx) (vec, todo, meta *bbolt.Bucket, err error) {
	root := tx.Bucket(bucketMemVectors)
	if root == nil {
		if !tx.Writable() {
			return nil, nil, nil, nil
		}
		if root, err = tx.CreateBucket(bucketMemVectors); err != nil {
			return nil, nil, nil, err
		}
	}
	get := func(name []byte) (*bbolt.Bucket, error) {
		if b := root.Bucket(name); b != nil || !tx.Writable() {
			return b, nil
		}
		return root.CreateBucket(name)
	}
	if vec, err = get(bucketVec); err != nil {
		return nil, nil, nil, err
	}
	if todo, err = get(bucketTodo); err != nil {
		return nil, nil, nil, err
	}
	meta, err = get(bucketVMeta)
	return vec, todo, meta, err
}

// docKey is session key, NUL, seq big-endian: a session's documents are
// one range.
func docKey(key string, seq uint64) []byte {
	b := make([]byte, 0, len(key)+9)
	b = append(b, key...)
	b = append(b, 0)
	return binary.BigEndian.AppendUint64(b, seq)
}

type stored struct {
	Key    string    `json:"k"`
	Seq    uint64    `json:"s"`
	Role   string    `json:"r,omitempty"`
	Author string    `json:"a,omitempty"`
	Text   string    `json:"t"`
	At     time.Time `json:"at"`
	Msg    string    `json:"m,omitempty"`
}

func toStored(d recall.Doc) stored {
	return stored{Key: d.Key, Seq: d.Seq, Role: string(d.Role), Author: d.Author, Text: d.Text, At: d.At, Msg: d.MessageID}
}

func (s stored) doc() recall.Doc {
	return recall.Doc{Key: s.Key, Seq: s.Seq, Role: transcript.Role(s.Role), Author: s.Author, Text: s.Text, At: s.At, MessageID: s.Msg}
}

// A vector value is: dims (uint32), dims float32 (little-endian), the
// document's JSON.
func encodeVec(vec []float32, d []byte) []byte {
	b := make([]byte, 4, 4+4*len(vec)+len(d))
	binary.LittleEndian.PutUint32(b, uint32(len(vec)))
	for _, x := range vec {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return append(b, d...)
}

func splitVec(v []byte) (vec []byte, doc []byte, ok bool) {
	if len(v) < 4 {
		return nil, nil, false
	}
	n := int(binary.LittleEndian.Uint32(v))
	if len(v) < 4+4*n {
		return nil, nil, false
	}
	return v[4 : 4+4*n], v[4+4*n:], true
}

// Want queues puts for embedding (keeping a vector of the same text) and
// drops deleted documents' vectors and queued text.
func (f RecallVectors) Want(_ context.Context, ups []recall.Update) error {
	err := f.s.commit.do(func(tx *bbolt.Tx) error {
		vb, tb, _, err := vbuckets(tx)
		if err != nil {
			return err
		}
		for _, u := range ups {
			k := docKey(u.Doc.Key, u.Doc.Seq)
			if u.Delete {
				if err := vb.Delete(k); err != nil {
					return err
				}
				if err := tb.Delete(k); err != nil {
					return err
				}
				continue
			}
			js, err := json.Marshal(toStored(u.Doc))
			if err != nil {
				return err
			}
			if old := vb.Get(k); old != nil {
				vec, d, ok := splitVec(old)
				var s stored
				if ok && json.Unmarshal(d, &s) == nil && s.Text == u.Doc.Text {
					if err := vb.Put(k, append(slices.Clone(old[:4+len(vec)]), js...)); err != nil {
						return err
					}
					continue
				}
				if err := vb.Delete(k); err != nil {
					return err
				}
			}
			if err := tb.Put(k, js); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("recall vectors: %w", err)
	}
	return nil
}

// Todo returns up to limit queued documents.
func (f RecallVectors) Todo(_ context.Context, limit int) ([]recall.Doc, error) {
	var out []recall.Doc
	err := f.s.db.View(func(tx *bbolt.Tx) error {
		_, tb, _, _ := vbuckets(tx)
		if tb == nil {
			return nil
		}
		c := tb.Cursor()
		for k, v := c.First(); k != nil && len(out) < limit; k, v = c.Next() {
			var s stored
			if err := json.Unmarshal(v, &s); err != nil {
				return fmt.Errorf("queued document %q: %w", k, err)
			}
			out = append(out, s.doc())
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("recall vectors: %w", err)
	}
	return out, nil
}

// Put stores each document's vector (normalised to unit length) if the
// document is still queued with the same text, and unqueues it.
func (f RecallVectors) Put(_ context.Context, docs []recall.Doc, vecs [][]float32) error {
	err := f.s.commit.do(func(tx *bbolt.Tx) error {
		vb, tb, _, err := vbuckets(tx)
		if err != nil {
			return err
		}
		for i, d := range docs {
			k := docKey(d.Key, d.Seq)
			q := tb.Get(k)
			var s stored
			if q == nil || json.Unmarshal(q, &s) != nil || s.Text != d.Text {
				continue // changed or deleted meanwhile: its newer state is queued, or gone
			}
			if err := vb.Put(k, encodeVec(unit(vecs[i]), slices.Clone(q))); err != nil {
				return err
			}
			if err := tb.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("recall vectors: %w", err)
	}
	return nil
}

func unit(v []float32) []float32 {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	out := make([]float32, len(v))
	if n == 0 {
		return out
	}
	n = math.Sqrt(n)
	for i, x := range v {
		out[i] = float32(float64(x) / n)
	}
	return out
}

// Nearest scans the vectors of keys and returns the limit most similar.
func (f RecallVectors) Nearest(_ context.Context, keys []string, vec []float32, limit int) ([]recall.Hit, error) {
	if limit <= 0 || len(vec) == 0 {
		return nil, nil
	}
	q := unit(vec)
	top := &minHeap{}
	err := f.s.db.View(func(tx *bbolt.Tx) error {
		vb, _, _, _ := vbuckets(tx)
		if vb == nil {
			return nil
		}
		c := vb.Cursor()
		for _, key := range keys {
			prefix := append([]byte(key), 0)
			for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
				raw, d, ok := splitVec(v)
				if !ok || len(raw) != 4*len(q) {
					continue // another model's length: never compared
				}
				var dot float32
				for i := range q {
					dot += q[i] * math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
				}
				if top.Len() < limit {
					heap.Push(top, cand{score: dot, doc: d})
				} else if dot > (*top)[0].score {
					(*top)[0] = cand{score: dot, doc: d}
					heap.Fix(top, 0)
				}
			}
		}
		// The documents' JSON is only valid in the transaction.
		for i := range *top {
			(*top)[i].doc = slices.Clone((*top)[i].doc)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("recall vectors: %w", err)
	}
	out := make([]recall.Hit, 0, top.Len())
	for _, c := range *top {
		var s stored
		if err := json.Unmarshal(c.doc, &s); err != nil {
			return nil, fmt.Errorf("recall vectors: a stored document: %w", err)
		}
		out = append(out, recall.Hit{Doc: s.doc(), Score: float64(c.score)})
	}
	slices.SortStableFunc(out, func(a, b recall.Hit) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return b.Doc.At.Compare(a.Doc.At)
	})
	return out, nil
}

type cand struct {
	score float32
	doc   []byte
}

type minHeap []cand

func (h minHeap) Len() int           { return len(h) }
func (h minHeap) Less(i, j int) bool { return h[i].score < h[j].score }
func (h minHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *minHeap) Push(x any)        { *h = append(*h, x.(cand)) }
func (h *minHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Model is the model whose vectors are kept ("" for none yet).
func (f RecallVectors) Model(context.Context) (string, error) {
	var m string
	err := f.s.db.View(func(tx *bbolt.Tx) error {
		if _, _, meta, _ := vbuckets(tx); meta != nil {
			m = string(meta.Get(keyModel))
		}
		return nil
	})
	return m, err
}

// Reset empties the vectors and the queue and records model.
func (f RecallVectors) Reset(_ context.Context, model string) error {
	err := f.s.commit.do(func(tx *bbolt.Tx) error {
		if tx.Bucket(bucketMemVectors) != nil {
			if err := tx.DeleteBucket(bucketMemVectors); err != nil {
				return err
			}
		}
		_, _, meta, err := vbuckets(tx)
		if err != nil {
			return err
		}
		return meta.Put(keyModel, []byte(model))
	})
	if err != nil {
		return fmt.Errorf("recall vectors: reset: %w", err)
	}
	return nil
}

// Pending counts the queued documents.
func (f RecallVectors) Pending(context.Context) (int, error) {
	var n int
	err := f.s.db.View(func(tx *bbolt.Tx) error {
		if _, tb, _, _ := vbuckets(tx); tb != nil {
			n = tb.Stats().KeyN
		}
		return nil
	})
	return n, err
}
