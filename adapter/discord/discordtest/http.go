package discordtest

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// APIPrefix is the REST path prefix discordgo v0.29.0 uses.
const APIPrefix = "/api/v9"

// Request is one REST call as received.
type Request struct {
	Method string
	Path   string // without the /api/v9 prefix, e.g. /channels/1/messages
	Route  string // matched template, e.g. /channels/{channel_id}/messages; empty when unmatched
	Query  url.Values
	Body   []byte
	Auth   string
	Header http.Header // as received (a clone)
	Status int
	Code   int // Discord error code of the response, 0 on success
	Time   time.Time
}

// apiError is Discord's JSON error body.
type apiError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Errors  any    `json:"errors,omitempty"`
}

type reply struct {
	status int
	body   any // nil: no body
}

func ok(body any) reply { return reply{status: http.StatusOK, body: body} }

func noContent() reply { return reply{status: http.StatusNoContent} }

func fail(status, code int, msg string) reply {
	return reply{status: status, body: &apiError{Code: code, Message: msg}}
}

// formError is a 50035 Invalid Form Body with a field error, like Discord's.
func formError(field, code, msg string) reply {
	return reply{status: http.StatusBadRequest, body: &apiError{
		Code: 50035, Message: "Invalid Form Body",
		Errors: map[string]any{field: map[string]any{"_errors": []any{map[string]any{"code": code, "message": msg}}}},
	}}
}

// Common Discord errors.
var (
	errUnknownChannel     = func() reply { return fail(404, 10003, "Unknown Channel") }
	errUnknownMessage     = func() reply { return fail(404, 10008, "Unknown Message") }
	errUnknownWebhook     = func() reply { return fail(404, 10015, "Unknown Webhook") }
	errUnknownGuild       = func() reply { return fail(404, 10004, "Unknown Guild") }
	errUnknownMember      = func() reply { return fail(404, 10007, "Unknown Member") }
	errUnknownUser        = func() reply { return fail(404, 10013, "Unknown User") }
	errUnknownInteraction = func() reply { return fail(404, 10062, "Unknown interaction") }
	errMissingAccess      = func() reply { return fail(403, 50001, "Missing Access") }
	errMissingPerms       = func() reply { return fail(403, 50013, "Missing Permissions") }
	errEmptyMessage       = func() reply { return fail(400, 50006, "Cannot send an empty message") }
	errArchived           = func() reply { return fail(400, 50083, "Thread is archived") }
	errLocked             = func() reply { return fail(403, 160005, "Thread is locked") }
	errTooManyWebhooks    = func() reply { return fail(400, 30007, "Maximum number of webhooks reached (15)") }
	errAlreadyAcked       = func() reply { return fail(400, 40060, "Interaction has already been acknowledged.") }
	errInvalidWebhookTok  = func() reply { return fail(401, 50027, "Invalid Webhook Token") }
)

type call struct {
	r    *http.Request
	p    map[string]string
	q    url.Values
	body []byte
	// acceptFiles: the handler takes files (a multipart body's files[n]),
	// which decode collects into uploads.
	acceptFiles bool
	uploads     []upload
}

func (c *call) decode(v any) reply {
	if boundary, ok := c.multipartBoundary(); ok {
		return c.decodeMultipart(boundary, v)
	}
	if len(bytes.TrimSpace(c.body)) == 0 {
		return reply{}
	}
	if err := json.Unmarshal(c.body, v); err != nil {
		return fail(400, 50109, "The request body contains invalid JSON.")
	}
	return reply{}
}

type route struct {
	method string
	tmpl   string
	segs   []string
	public bool // no bot token needed (webhook token / interaction token routes)
	global bool // counts toward the global rate limit
	h      func(*call) reply
}

func (rt *route) match(segs []string) map[string]string {
	if len(segs) != len(rt.segs) {
		return nil
	}
	p := map[string]string{}
	for i, s := range rt.segs {
		if strings.HasPrefix(s, "{") {
			if segs[i] == "" {
				return nil
			}
			p[s[1:len(s)-1]] = segs[i]
		} else if s != segs[i] {
			return nil
		}
	}
	return p
}

// majorKey is the top-level resource part of a rate-limit bucket.
func majorKey(p map[string]string) string {
	switch {
	case p["channel_id"] != "":
		return p["channel_id"]
	case p["guild_id"] != "":
		return p["guild_id"]
	case p["webhook_id"] != "":
		return p["webhook_id"] + "/" + p["webhook_token"]
	case p["interaction_id"] != "":
		return p["interaction_id"]
	}
	return ""
}

func splitPath(p string) []string { return strings.Split(strings.Trim(p, "/"), "/") }

func (e *Emulator) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if isGatewayPath(r.URL.Path) {
		e.serveGateway(w, r)
		return
	}
	if strings.HasPrefix(r.URL.Path, "/attachments/") {
		e.serveAttachment(w, r)
		return
	}
	path, found := strings.CutPrefix(r.URL.Path, APIPrefix)
	if !found {
		writeJSON(w, nil, 404, &apiError{Code: 0, Message: "404: Not Found"})
		return
	}
	body, _ := io.ReadAll(r.Body)
	segs := splitPath(path)
	var rt *route
	var params map[string]string
	for i := range e.rtab {
		cand := &e.rtab[i]
		if cand.method != r.Method {
			continue
		}
		if p := cand.match(segs); p != nil {
			rt, params = cand, p
			break
		}
	}
	req := Request{Method: r.Method, Path: path, Query: r.URL.Query(), Body: body, Auth: r.Header.Get("Authorization"), Header: r.Header.Clone()}
	if !e.opts.DisableReferee {
		e.checkSpec(req)
	}
	if rt == nil {
		e.logf("discordtest: unimplemented route %s %s", r.Method, path)
		e.mu.Lock()
		e.referee = append(e.referee, Violation{Method: r.Method, Path: path, Kind: "unimplemented", Detail: "emulator has no handler"})
		e.mu.Unlock()
		e.finish(w, req, nil, fail(404, 0, "404: Not Found"))
		return
	}
	req.Route = rt.tmpl
	if !rt.public && !e.tokenOK(req.Auth) {
		e.finish(w, req, nil, fail(401, 0, "401: Unauthorized"))
		return
	}

	f := e.takeFault(r.Method, segs, body)
	if f != nil && f.Latency > 0 {
		select {
		case <-time.After(f.Latency):
		case <-r.Context().Done():
			return
		}
	}

	e.mu.Lock()
	hdr, limited := e.limits.take(e.opts.Now(), r.Method, rt.tmpl, majorKey(params), rt.global)
	if limited != nil {
		e.broadcastLocked()
		e.mu.Unlock()
		e.finish(w, req, hdr, limited.reply())
		return
	}
	if f != nil && f.Mode == FaultReject && f.Status != 0 {
		var rep reply
		if f.Status == http.StatusTooManyRequests {
			l := e.limits.countFault(f, rt.tmpl, majorKey(params))
			hdr = l.headers(hdr)
			rep = l.reply()
		} else {
			rep = fail(f.Status, f.Code, f.message())
		}
		e.mu.Unlock()
		e.finish(w, req, hdr, rep)
		return
	}
	c := &call{r: r, p: params, q: req.Query, body: body}
	rep := rt.h(c)
	e.mu.Unlock()

	if f != nil && f.Mode == FaultDropAfterCommit {
		req.Status = 0
		e.record(req)
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	}
	if f != nil && f.Mode == Fault500AfterCommit {
		status := f.Status
		if status == 0 {
			status = 500
		}
		rep = fail(status, f.Code, f.message())
	}
	e.finish(w, req, hdr, rep)
}

func (e *Emulator) record(req Request) {
	req.Time = e.opts.Now()
	e.mu.Lock()
	e.requests = append(e.requests, req)
	e.broadcastLocked()
	e.mu.Unlock()
}

func (e *Emulator) finish(w http.ResponseWriter, req Request, hdr http.Header, rep reply) {
	req.Status = rep.status
	if ae, ok := rep.body.(*apiError); ok {
		req.Code = ae.Code
	}
	e.record(req)
	writeJSON(w, hdr, rep.status, rep.body)
}

func writeJSON(w http.ResponseWriter, hdr http.Header, status int, body any) {
	for k, vs := range hdr {
		w.Header()[k] = vs
	}
	if body == nil {
		if status == 0 {
			status = http.StatusNoContent
		}
		w.WriteHeader(status)
		return
	}
	b, err := json.Marshal(body)
	if err != nil {
		status, b = 500, []byte(`{"code":0,"message":"emulator marshal error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// Requests returns a copy of the REST request log, oldest first.
func (e *Emulator) Requests() []Request {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Request(nil), e.requests...)
}

// RequestsTo returns logged requests with the given method and route template
// (e.g. "POST", "/channels/{channel_id}/messages"); an empty method matches any.
func (e *Emulator) RequestsTo(method, route string) []Request {
	var out []Request
	for _, r := range e.Requests() {
		if (method == "" || r.Method == method) && r.Route == route {
			out = append(out, r)
		}
	}
	return out
}

// serveAttachment is the CDN: GET of a user attachment, no authentication
// (a bot token sent here is a leak: the request fails 400 and counts as a
// violation of kind "cdn_auth").
func (e *Emulator) serveAttachment(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	f, ok := e.world.files[r.URL.EscapedPath()]
	if !ok {
		f, ok = e.world.files[r.URL.Path]
	}
	e.fetches[r.URL.Path]++
	auth := r.Header.Get("Authorization")
	e.mu.Unlock()
	switch {
	case r.Method != http.MethodGet:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	case auth != "":
		http.Error(w, "the CDN takes no Authorization header", http.StatusBadRequest)
	case !ok:
		http.Error(w, "not found", http.StatusNotFound)
	default:
		if f.ContentType != "" {
			w.Header().Set("Content-Type", f.ContentType)
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(f.Data)))
		_, _ = w.Write(f.Data)
	}
}

// AttachmentFetches counts GETs of attachment URLs (by path, without the query).
func (e *Emulator) AttachmentFetches() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.fetches)
}
