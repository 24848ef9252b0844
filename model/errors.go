package model

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentbot/agentbot/internal/redact"
)

// ErrorKind classifies provider failures.
type ErrorKind string

// Error kinds.
const (
	KindAuth       ErrorKind = "auth"        // 401, 403
	KindRateLimit  ErrorKind = "rate-limit"  // 429
	KindServer     ErrorKind = "server"      // 5xx, or the provider could not be reached
	KindTimeout    ErrorKind = "timeout"     // deadline exceeded, network timeout
	KindBadRequest ErrorKind = "bad-request" // 400, 404, 413, 422
	KindCanceled   ErrorKind = "canceled"    // the caller's context was canceled
	KindUnknown    ErrorKind = "unknown"
)

// Kinds lists every ErrorKind (used by echo's !fail grammar and tests).
var Kinds = []ErrorKind{KindAuth, KindRateLimit, KindServer, KindTimeout, KindBadRequest, KindCanceled, KindUnknown}

// Sentinels for errors.Is; an *Error matches the sentinel of its Kind.
var (
	ErrAuth        = errors.New("model provider: authentication failed")
	ErrRateLimited = errors.New("model provider: rate limited")
	ErrServer      = errors.New("model provider: server error")
	ErrTimeout     = errors.New("model provider: timeout")
	ErrBadRequest  = errors.New("model provider: bad request")
	ErrCanceled    = errors.New("model provider: canceled")
)

var sentinels = map[ErrorKind]error{
	KindAuth:       ErrAuth,
	KindRateLimit:  ErrRateLimited,
	KindServer:     ErrServer,
	KindTimeout:    ErrTimeout,
	KindBadRequest: ErrBadRequest,
	KindCanceled:   ErrCanceled,
}

// Error is a provider failure.
type Error struct {
	Kind     ErrorKind
	Status   int    // HTTP status, 0 when no response came back
	Provider string // "openai", "anthropic", "echo"
	Err      error  // underlying error (already redacted of credentials)
	// Retry is when the provider said to try again (its Retry-After),
	// zero when it did not say.
	Retry RetryHint
}

// RetryHint is a provider's Retry-After: a delay from when the response
// came, or an instant.
type RetryHint struct {
	Delay time.Duration
	At    time.Time
}

// Until is the instant the hint names, a delay counted from now; zero
// when there is no hint.
func (h RetryHint) Until(now time.Time) time.Time {
	switch {
	case !h.At.IsZero():
		return h.At
	case h.Delay > 0:
		return now.Add(h.Delay)
	}
	return time.Time{}
}

// ParseRetryAfter reads a response's retry-after-ms (milliseconds, sent by
// OpenAI and Anthropic) or Retry-After (seconds or an HTTP-date, RFC 9110)
// header; a missing or malformed value is no hint.
func ParseRetryAfter(h http.Header) RetryHint {
	if ms, err := strconv.ParseFloat(strings.TrimSpace(h.Get("retry-after-ms")), 64); err == nil && ms > 0 && ms < 1e12 {
		return RetryHint{Delay: time.Duration(ms * float64(time.Millisecond))}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return RetryHint{}
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s > 0 && s < 1e9 {
			return RetryHint{Delay: time.Duration(s * float64(time.Second))}
		}
		return RetryHint{}
	}
	if at, err := http.ParseTime(v); err == nil {
		return RetryHint{At: at}
	}
	return RetryHint{}
}

// RetryUntil is when err's provider said to try again, relative to now
// (zero: it did not say).
func RetryUntil(err error, now time.Time) time.Time {
	var me *Error
	if !errors.As(err, &me) {
		return time.Time{}
	}
	return me.Retry.Until(now)
}

// Error implements error. It never contains credentials as long as Err was
// built with Redact (providers do this).
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Provider)
	if e.Provider == "" {
		b.WriteString("model")
	}
	b.WriteString(": ")
	b.WriteString(string(e.Kind))
	if e.Status != 0 {
		fmt.Fprintf(&b, " (HTTP %d)", e.Status)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is the sentinel of e's kind.
func (e *Error) Is(target error) bool {
	s, ok := sentinels[e.Kind]
	return ok && s == target
}

// KindForStatus maps an HTTP status to an ErrorKind.
func KindForStatus(status int) ErrorKind {
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return KindAuth
	case status == http.StatusTooManyRequests:
		return KindRateLimit
	case status == http.StatusRequestTimeout || status == http.StatusGatewayTimeout:
		return KindTimeout
	case status >= 500:
		return KindServer
	case status == http.StatusBadRequest, status == http.StatusNotFound,
		status == http.StatusRequestEntityTooLarge, status == http.StatusUnprocessableEntity:
		return KindBadRequest
	}
	return KindUnknown
}

// KindForError classifies an error that came without an HTTP status:
// context and network timeouts, cancellation, unreachable servers.
func KindForError(err error) ErrorKind {
	var ne net.Error
	switch {
	case err == nil:
		return KindUnknown
	case errors.Is(err, context.DeadlineExceeded):
		return KindTimeout
	case errors.As(err, &ne) && ne.Timeout():
		return KindTimeout
	case errors.Is(err, context.Canceled):
		return KindCanceled
	}
	var oe *net.OpError
	var de *net.DNSError
	if errors.As(err, &oe) || errors.As(err, &de) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return KindServer // could not reach the provider, or it hung up
	}
	return KindUnknown
}

// Retryable reports whether err is a failure another model (or a later
// attempt) may not have: rate limited (429), overloaded or a server error
// (5xx, 529), a timeout, a refused or reset connection. A rejected request
// (400, 404, 413, 422: a bad model name, context too long), rejected
// credentials (401, 403), a cancellation and anything unclassified are not:
// another model would hide a problem an operator must see.
func Retryable(err error) bool {
	switch KindOf(err) {
	case KindRateLimit, KindServer, KindTimeout:
		return true
	}
	return false
}

// KindOf is err's ErrorKind (KindForError for errors that are no *Error).
func KindOf(err error) ErrorKind {
	var me *Error
	if errors.As(err, &me) {
		return me.Kind
	}
	return KindForError(err)
}

// NewError builds an *Error for provider from an HTTP status (when status is
// non-zero) or from err. secrets (API keys) are redacted from err's text.
func NewError(provider string, status int, err error, secrets ...string) *Error {
	kind := KindForError(err)
	if status != 0 {
		kind = KindForStatus(status)
	}
	return &Error{Kind: kind, Status: status, Provider: provider, Err: Redact(err, secrets...)}
}

// Redact wraps err so that its text has every secret (of at least
// redact.MinSecretLen characters) and every credential-shaped string
// replaced by "[redacted]" (the rules of internal/redact). errors.Is/As
// still see err.
func Redact(err error, secrets ...string) error { return redact.Error(err, secrets...) }

// UserMessage is what a chat says of e (core/usertext.UserFacing: the chat
// boundary shows it): the kind of failure and what to do, never
// credentials or provider response bodies.
func (e *Error) UserMessage() string {
	switch e.Kind {
	case KindAuth:
		return "The model provider rejected the API key or its permissions; an operator needs to check the model configuration."
	case KindRateLimit:
		return "The model provider is rate limiting requests; try again in a moment."
	case KindServer:
		if e.Status == 0 {
			return "The model provider could not be reached; try again later."
		}
		return "The model provider had a server error; try again later."
	case KindTimeout:
		return "The model took too long to answer; try again."
	case KindBadRequest:
		return "The model provider rejected the request; an operator should check the model name and settings."
	case KindCanceled:
		return "The model request was cancelled."
	}
	return "The model request failed; try again later."
}

// Classified is err as the model's error: err itself when an *Error is in
// its chain (or err is nil), else an *Error of the kind err's chain says
// (KindForError) wrapping it, so that a failed model call reads for people
// as its kind of failure (UserMessage).
func Classified(err error) error {
	var me *Error
	if err == nil || errors.As(err, &me) {
		return err
	}
	return &Error{Kind: KindForError(err), Err: err}
}
