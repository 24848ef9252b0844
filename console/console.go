package console

import (
	"context"
	"crypto/subtle"
	"embed"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/core/audit"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/scheduler"
)

// Store is everything the console reads. *bolt.Store satisfies it; there is
// no writer in it, and no access to webhook credentials.
type Store interface {
	BindingReader
	TranscriptReader
	DeliveryReader
	SessionReader
	JobReader
}

// BindingReader lists binding records (active and ended).
type BindingReader interface {
	Bindings(ctx context.Context) ([]binding.Record, error)
}

// TranscriptReader reads transcripts a page at a time.
type TranscriptReader interface {
	Sessions(ctx context.Context) ([]string, error)
	Tail(ctx context.Context, key string, n int) ([]transcript.Entry, error)
	Range(ctx context.Context, key string, from uint64, limit int) ([]transcript.Entry, error)
}

// DeliveryReader reads the delivery outbox, newest first.
type DeliveryReader interface {
	Deliveries(ctx context.Context, state delivery.PendingState, limit int) ([]delivery.Record, error)
	GetDelivery(ctx context.Context, id string) (delivery.Record, bool, error)
}

// SessionReader reads the session registry (subagents and job runs).
type SessionReader interface {
	SessionInfos(ctx context.Context) ([]session.Info, error)
}

// JobReader reads scheduled jobs and their run history.
type JobReader interface {
	Jobs(ctx context.Context) ([]scheduler.Job, error)
	Runs(ctx context.Context, jobID string, limit int) ([]scheduler.Run, error)
}

// State is the process's liveness as the overview shows it.
type State struct {
	Ready   bool      // the Discord gateway is connected and ready
	Started time.Time // when the process started
}

// Status reports the current State; nil shows "unknown".
type Status func() State

// Options configure New.
type Options struct {
	Store  Store
	Status Status
	// Location is the zone times are shown in (default UTC). Job schedules
	// are also shown in the job's own zone.
	Location *time.Location
	// Token, when set, is required on every request (see CheckAccess and the
	// package doc).
	Token string
	Log   zerolog.Logger
	// Now is the clock (default time.Now); tests pin it.
	Now func() time.Time
	// PageSize is the rows per page (default 50).
	PageSize int
	// Audit, when set, compares a conversation's transcripts with what its
	// platform displays now (audit.Auditor.Conversation): the conversation
	// view shows the chat's side and the differences. nil: the view shows
	// the transcript's side only.
	Audit func(ctx context.Context, conversation string) (audit.Report, error)
	// BindingsTTL is how long a read of all bindings is reused (default 2s;
	// negative disables the cache).
	BindingsTTL time.Duration
	// Memory is the recall search of the Memory page (nil: memory is off).
	Memory Searcher
	// Notes lists the notes the Memory page shows per scope (nil: none).
	Notes NoteLister
}

//go:embed templates/*.html
var templateFS embed.FS

// Console serves the pages. It is an http.Handler.
type Console struct {
	o    Options
	tmpl *template.Template
	mux  *http.ServeMux

	mu       sync.Mutex
	bindAt   time.Time
	bindRecs []binding.Record
}

// New builds the console handler. Mount it at "/" (or use Mount).
func New(o Options) *Console {
	if o.Location == nil {
		o.Location = time.UTC
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.PageSize <= 0 {
		o.PageSize = 50
	}
	if o.BindingsTTL == 0 {
		o.BindingsTTL = 2 * time.Second
	}
	c := &Console{o: o}
	c.tmpl = template.Must(template.New("console").Funcs(c.funcs()).ParseFS(templateFS, "templates/*.html"))
	m := http.NewServeMux()
	m.HandleFunc("/{$}", c.page("overview", c.overview))
	m.HandleFunc("/bindings", c.page("bindings", c.bindings))
	m.HandleFunc("/jobs", c.page("jobs", c.jobs))
	m.HandleFunc("/jobs/{id}", c.page("job", c.job))
	m.HandleFunc("/sessions", c.page("sessions", c.sessions))
	m.HandleFunc("/sessions/{key...}", c.page("conversation", c.conversation))
	m.HandleFunc("/deliveries", c.page("deliveries", c.deliveries))
	m.HandleFunc("/usage", c.page("usage", c.usage))
	m.HandleFunc("/memory", c.page("memory", c.memory))
	c.mux = m
	return c
}

// Mount registers the console at "/" on mux; more specific patterns already
// on mux (/healthz, /metrics, ...) keep precedence.
func (c *Console) Mount(mux *http.ServeMux) { mux.Handle("/", c) }

// ServeHTTP checks access and the method, then serves a page.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	if c.o.Token != "" && !authorized(r, c.o.Token) {
		h.Set("WWW-Authenticate", `Basic realm="agentbot console", charset="UTF-8"`)
		http.Error(w, "unauthorized: send Authorization: Bearer <http.token> (or HTTP Basic auth with the token as the password)", http.StatusUnauthorized)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed: the console is read-only", http.StatusMethodNotAllowed)
		return
	}
	c.mux.ServeHTTP(w, r)
}

// authorized accepts "Bearer <token>" or Basic auth whose password is token.
func authorized(r *http.Request, token string) bool {
	got := ""
	if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		got = strings.TrimSpace(v)
	} else if _, pw, ok := r.BasicAuth(); ok {
		got = pw
	}
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}

// CheckAccess refuses to serve the console on a non-loopback address
// without a token. An empty listen (HTTP disabled) is fine.
func CheckAccess(listen, token string) error {
	if listen == "" || token != "" || IsLoopback(listen) {
		return nil
	}
	return fmt.Errorf("http.listen %s is not loopback: set http.token (e.g. ${BOT_HTTP_TOKEN}) or listen on 127.0.0.1", listen)
}

// IsLoopback reports whether a host:port listen address only accepts local
// connections ("localhost", 127.0.0.0/8, ::1). An empty host listens on
// every interface, so it is not loopback.
func IsLoopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		host = listen
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// page wraps a data builder: it renders the named template into a buffer
// (so an error never leaves half a page) and writes it.
func (c *Console) page(name string, build func(r *http.Request) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		data, err := build(r)
		if err != nil {
			status := http.StatusInternalServerError
			if e, ok := err.(httpError); ok {
				status = e.status
			} else {
				c.o.Log.Error().Err(err).Str("page", name).Msg("console page")
			}
			c.render(w, r, status, "error", errorPage{base: c.base(name, "Error"), Status: status, Message: Redact(err.Error())})
			return
		}
		c.render(w, r, http.StatusOK, name, data)
	}
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, data any) {
	var b strings.Builder
	if err := c.tmpl.ExecuteTemplate(&b, name, data); err != nil {
		c.o.Log.Error().Err(err).Str("template", name).Msg("console render")
		http.Error(w, "render failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		// Last line of defence: nothing token-looking leaves the console.
		out := Redact(b.String())
		if c.o.Token != "" {
			out = strings.ReplaceAll(out, c.o.Token, "[redacted]")
		}
		_, _ = w.Write([]byte(out))
	}
}

// httpError is a page error with its status (bad query, not found).
type httpError struct {
	status int
	msg    string
}

func (e httpError) Error() string { return e.msg }

func notFound(format string, args ...any) error {
	return httpError{http.StatusNotFound, fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) error {
	return httpError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

// allBindings reads every binding record, reusing a read younger than
// BindingsTTL (the store decodes every record on each call).
func (c *Console) allBindings(ctx context.Context) ([]binding.Record, error) {
	if c.o.BindingsTTL < 0 {
		recs, err := c.o.Store.Bindings(ctx)
		sortBindings(recs)
		return recs, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if c.bindRecs != nil && now.Sub(c.bindAt) < c.o.BindingsTTL {
		return c.bindRecs, nil
	}
	recs, err := c.o.Store.Bindings(ctx)
	if err != nil {
		return nil, err
	}
	if recs == nil {
		recs = []binding.Record{}
	}
	sortBindings(recs)
	c.bindRecs, c.bindAt = recs, now
	return recs, nil
}
