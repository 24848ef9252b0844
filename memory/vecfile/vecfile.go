package vecfile

import (
	"bytes"
	"cmp"
	"container/heap"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/agentbot/agentbot/core/memory"
	"github.com/agentbot/agentbot/core/transcript"
)

var _ memory.Vectors = (*File)(nil)

var (
	bucketVec  = []byte("vec")
	bucketTodo = []byte("todo")
	bucketMeta = []byte("meta")
	keyModel   = []byte("model")
)

// Path is the vectors file of the recall index directory dir.
func Path(dir string) string { return dir + ".vectors" }

// File is the vectors in one bbolt file. Safe for concurrent use.
type File struct{ db *bolt.DB }

// Open opens (creating) the file at path.
func Open(path string) (*File, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("recall vectors %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketVec, bucketTodo, bucketMeta} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("recall vectors %s: %w", path, err)
	}
	return &File{db: db}, nil
}

// Close closes the file.
func (f *File) Close() error { return f.db.Close() }

// Remove deletes the vectors file at path (memory is off).
func Remove(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("recall vectors: %w", err)
	}
	return nil
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

func toStored(d memory.Doc) stored {
	return stored{Key: d.Key, Seq: d.Seq, Role: string(d.Role), Author: d.Author, Text: d.Text, At: d.At, Msg: d.MessageID}
}

func (s stored) doc() memory.Doc {
	return memory.Doc{Key: s.Key, Seq: s.Seq, Role: roleOf(s.Role), Author: s.Author, Text: s.Text, At: s.At, MessageID: s.Msg}
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
func (f *File) Want(_ context.Context, ups []memory.Update) error {
	err := f.db.Update(func(tx *bolt.Tx) error {
		vb, tb := tx.Bucket(bucketVec), tx.Bucket(bucketTodo)
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
func (f *File) Todo(_ context.Context, limit int) ([]memory.Doc, error) {
	var out []memory.Doc
	err := f.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketTodo).Cursor()
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
func (f *File) Put(_ context.Context, docs []memory.Doc, vecs [][]float32) error {
	err := f.db.Update(func(tx *bolt.Tx) error {
		vb, tb := tx.Bucket(bucketVec), tx.Bucket(bucketTodo)
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
func (f *File) Nearest(_ context.Context, keys []string, vec []float32, limit int) ([]memory.Hit, error) {
	if limit <= 0 || len(vec) == 0 {
		return nil, nil
	}
	q := unit(vec)
	top := &minHeap{}
	err := f.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketVec).Cursor()
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
	out := make([]memory.Hit, 0, top.Len())
	for _, c := range *top {
		var s stored
		if err := json.Unmarshal(c.doc, &s); err != nil {
			return nil, fmt.Errorf("recall vectors: a stored document: %w", err)
		}
		out = append(out, memory.Hit{Doc: s.doc(), Score: float64(c.score)})
	}
	slices.SortStableFunc(out, func(a, b memory.Hit) int {
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
func (f *File) Model(context.Context) (string, error) {
	var m string
	err := f.db.View(func(tx *bolt.Tx) error {
		m = string(tx.Bucket(bucketMeta).Get(keyModel))
		return nil
	})
	return m, err
}

// Reset empties the vectors and the queue and records model.
func (f *File) Reset(_ context.Context, model string) error {
	err := f.db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketVec, bucketTodo} {
			if err := tx.DeleteBucket(b); err != nil {
				return err
			}
			if _, err := tx.CreateBucket(b); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Put(keyModel, []byte(model))
	})
	if err != nil {
		return fmt.Errorf("recall vectors: reset: %w", err)
	}
	return nil
}

// Pending counts the queued documents.
func (f *File) Pending(context.Context) (int, error) {
	var n int
	err := f.db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(bucketTodo).Stats().KeyN
		return nil
	})
	return n, err
}

func roleOf(s string) transcript.Role { return transcript.Role(s) }
