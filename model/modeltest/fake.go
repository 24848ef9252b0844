package modeltest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/agentbot/agentbot/model"
)

// Reply is what a fake answers to a valid request.
type Reply struct {
	Status  int    // non-2xx: an error response in the API's shape
	Message string // error message for non-2xx replies
	// RetryAfter, for a non-2xx reply, is its Retry-After header (seconds
	// or an HTTP-date; "" for none).
	RetryAfter string
	Text       string
	ToolCalls  []model.ToolCall
	// Delay holds the response back (or until the client gives up).
	Delay time.Duration
	// Chunks, for a streamed request ("stream": true), are the text
	// deltas sent (default: Text as one delta), ChunkDelay apart.
	Chunks     []string
	ChunkDelay time.Duration
	// Cut, for a streamed request, drops the connection after the chunks
	// (a provider dying mid-answer).
	Cut bool
	// StreamError, for a streamed request to the Anthropic fake, is the
	// error type of an error event sent after the chunks instead of the
	// rest of the message (e.g. "overloaded_error").
	StreamError string
	// Usage is the token count reported (default: 1 input, 1 output).
	Usage model.Usage
}

// usage returns the reported token count.
func (r Reply) usage() model.Usage {
	if r.Usage == (model.Usage{}) {
		return model.Usage{Input: 1, Output: 1}
	}
	return r.Usage
}

// cut ends a streamed reply by dropping the connection when r.Cut is set.
func (r Reply) cut() {
	if r.Cut {
		panic(http.ErrAbortHandler)
	}
}

// chunks returns the text deltas of a streamed reply.
func (r Reply) chunks() []string {
	if len(r.Chunks) > 0 {
		return r.Chunks
	}
	if r.Text == "" {
		return nil
	}
	return []string{r.Text}
}

// sse writes one server-sent event (event may be empty) and flushes it.
func sse(w http.ResponseWriter, event string, data any) {
	raw, _ := json.Marshal(data)
	if event != "" {
		_, _ = io.WriteString(w, "event: "+event+"\n")
	}
	_, _ = io.WriteString(w, "data: "+string(raw)+"\n\n")
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

func startSSE(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
}

// Body is a decoded JSON request body.
type Body = map[string]any

// fake is the part shared by both API fakes.
type fake struct {
	srv *httptest.Server
	// APIKey, when non-empty, is required on every request (401 otherwise).
	apiKey string

	mu       sync.Mutex
	bodies   []Body
	respond  func(Body) Reply
	rejected []string
}

func (f *fake) record(r *http.Request) (Body, []byte, error) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, nil, err
	}
	var b Body
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, raw, err
	}
	f.mu.Lock()
	f.bodies = append(f.bodies, b)
	f.mu.Unlock()
	return b, raw, nil
}

func (f *fake) reply(b Body) Reply {
	f.mu.Lock()
	fn := f.respond
	f.mu.Unlock()
	if fn == nil {
		return Reply{Text: "ok"}
	}
	return fn(b)
}

func (f *fake) reject(msg string) {
	f.mu.Lock()
	f.rejected = append(f.rejected, msg)
	f.mu.Unlock()
}

// Requests returns the decoded bodies received so far.
func (f *fake) Requests() []Body {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Body(nil), f.bodies...)
}

// Last returns the last request body (nil if none).
func (f *fake) Last() Body {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.bodies) == 0 {
		return nil
	}
	return f.bodies[len(f.bodies)-1]
}

// Rejections returns the validation messages of requests answered with 400.
func (f *fake) Rejections() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.rejected...)
}

// Respond sets how valid requests are answered.
func (f *fake) Respond(fn func(Body) Reply) {
	f.mu.Lock()
	f.respond = fn
	f.mu.Unlock()
}

func wait(r *http.Request, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func newServer(t testing.TB, h http.Handler) *httptest.Server {
	srv := httptest.NewServer(h) // listens on 127.0.0.1
	if t != nil {
		t.Cleanup(srv.Close)
	}
	return srv
}

func str(v any) string {
	s, _ := v.(string)
	return s
}
