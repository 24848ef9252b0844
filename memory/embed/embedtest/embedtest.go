// Package embedtest is a loopback fake of an OpenAI-compatible embeddings
// endpoint, as strict as the real one where recall depends on it: POST
// /embeddings only, a model and a non-empty input required, the data in
// the input's order with its index. Its vectors have meaning of a kind: a
// word of a concept (Concepts) points along that concept's axis, so texts
// sharing a concept and no word are near.
package embedtest

import (
	"encoding/json"
	"hash/fnv"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Dims is the vectors' length.
const Dims = 32

// Concepts are groups of words of one meaning; group i is axis i.
var Concepts = [][]string{
	{"car", "automobile", "vehicle", "sedan"},
	{"cat", "kitten", "feline"},
	{"money", "payment", "invoice", "salary"},
	{"holiday", "vacation", "leave"},
}

// Server is the fake endpoint.
type Server struct {
	URL string // base URL, ".../v1"
	// Down makes every request fail with 503.
	Down atomic.Bool

	mu    sync.Mutex
	texts int // texts embedded
	calls int
}

// New starts a server, closed when t ends.
func New(t testing.TB) *Server {
	s := &Server{}
	h := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(h.Close)
	s.URL = h.URL + "/v1"
	return s
}

// Calls and Texts count the requests answered and the texts embedded.
func (s *Server) Calls() (calls, texts int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls, s.texts
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/embeddings" {
		http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
		return
	}
	if s.Down.Load() {
		http.Error(w, `{"error":{"message":"overloaded"}}`, http.StatusServiceUnavailable)
		return
	}
	var req struct {
		Model string          `json:"model"`
		Input json.RawMessage `json:"input"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model == "" {
		http.Error(w, `{"error":{"message":"model and input are required"}}`, http.StatusBadRequest)
		return
	}
	var texts []string
	if err := json.Unmarshal(req.Input, &texts); err != nil {
		var one string
		if err := json.Unmarshal(req.Input, &one); err != nil {
			http.Error(w, `{"error":{"message":"input must be a string or an array of strings"}}`, http.StatusBadRequest)
			return
		}
		texts = []string{one}
	}
	type datum struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float64 `json:"embedding"`
	}
	out := struct {
		Object string         `json:"object"`
		Model  string         `json:"model"`
		Data   []datum        `json:"data"`
		Usage  map[string]int `json:"usage"`
	}{Object: "list", Model: req.Model, Usage: map[string]int{"prompt_tokens": 1, "total_tokens": 1}}
	for i, t := range texts {
		if t == "" {
			http.Error(w, `{"error":{"message":"input cannot be an empty string"}}`, http.StatusBadRequest)
			return
		}
		out.Data = append(out.Data, datum{Object: "embedding", Index: i, Embedding: Vector(t)})
	}
	s.mu.Lock()
	s.calls++
	s.texts += len(texts)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// Vector is the fake meaning of text: a strong pull along each concept
// axis one of its words belongs to, a weak one per other word (hashed onto
// the remaining axes).
func Vector(text string) []float64 {
	v := make([]float64, Dims)
	for _, w := range strings.Fields(strings.ToLower(text)) {
		w = strings.Trim(w, ".,!?;:'\"")
		hit := false
		for i, c := range Concepts {
			for _, cw := range c {
				if w == cw {
					v[i] += 4
					hit = true
				}
			}
		}
		if !hit {
			h := fnv.New32a()
			_, _ = h.Write([]byte(w))
			v[len(Concepts)+int(h.Sum32()%uint32(Dims-len(Concepts)))] += 1
		}
	}
	return v
}
