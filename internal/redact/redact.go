package redact

import (
	"encoding/json"
	"io"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Mask replaces a secret.
const Mask = "[redacted]"

// MinSecretLen is the shortest known value a Redactor replaces.
const MinSecretLen = 8

var (
	// A webhook or interaction URL path: the id stays, the token goes.
	urlToken = regexp.MustCompile(`((?i:/|%2F)(?:webhooks|interactions)(?i:/|%2F)[0-9]+(?i:/|%2F))[A-Za-z0-9_.~+=-]+`)
	// Discord bot/user tokens: base64 id . timestamp . hmac.
	botToken = regexp.MustCompile(`[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{5,7}\.[A-Za-z0-9_-]{25,}`)
	// Interaction tokens start with base64("interaction:").
	interactionToken = regexp.MustCompile(`aW50ZXJhY3Rpb246[A-Za-z0-9_.-]*`)
	// Authorization credentials ("Bot " needs a token-long word: "Bot
	// responses" is prose).
	authHeader = regexp.MustCompile(`\b(Bot\s+[A-Za-z0-9._~+/=-]{20,}|(?:[Bb]earer|BEARER)\s+[A-Za-z0-9._~+/=-]{8,})`)
	// URL userinfo password: scheme://user:password@host.
	userinfo = regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s"'\\]*:)[^@/\s"'\\]+@`)
	// Keyword DSN password: password=secret or password='se cret'.
	dsnPassword = regexp.MustCompile(`(?i)\b(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s"']+)`)
	// Model API keys.
	apiKey = regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{16,}`)
)

// String applies the shape rules to s.
func String(s string) string {
	s = urlToken.ReplaceAllString(s, "${1}"+Mask)
	s = authHeader.ReplaceAllStringFunc(s, func(m string) string {
		return strings.Fields(m)[0] + " " + Mask
	})
	s = userinfo.ReplaceAllString(s, "${1}"+Mask+"@")
	s = dsnPassword.ReplaceAllString(s, "${1}"+Mask)
	s = interactionToken.ReplaceAllString(s, Mask)
	s = botToken.ReplaceAllString(s, Mask)
	s = apiKey.ReplaceAllString(s, Mask)
	return s
}

// Redactor replaces known secret values and the shapes String knows. The
// zero value is ready; it is safe for concurrent use.
type Redactor struct {
	mu      sync.RWMutex
	secrets []string
}

// New returns a Redactor for secrets.
func New(secrets ...string) *Redactor {
	r := &Redactor{}
	r.Add(secrets...)
	return r
}

// Add registers more secret values (e.g. a token rotated by a reload).
func (r *Redactor) Add(secrets ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range secrets {
		if len(s) < MinSecretLen || slices.Contains(r.secrets, s) {
			continue // a reload adds the same values again
		}
		r.secrets = append(r.secrets, s)
		// The forms a JSON log line holds: zerolog escapes like
		// encoding/json without HTML escaping; json.Marshal escapes <>& too.
		for _, html := range []bool{false, true} {
			var b strings.Builder
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(html)
			if enc.Encode(s) == nil {
				q := strings.TrimSuffix(b.String(), "\n")
				if esc := q[1 : len(q)-1]; esc != s && !slices.Contains(r.secrets, esc) {
					r.secrets = append(r.secrets, esc)
				}
			}
		}
	}
}

// Unfinished returns how many bytes at the end of s may be the start of a
// known secret (a proper prefix of one, 4 bytes or more): a text that is
// still growing (a streamed reply) shows them only once the rest of the
// text says whether they are the secret.
func (r *Redactor) Unfinished(s string) int {
	if r == nil {
		return 0
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	n := 0
	for _, k := range r.secrets {
		for l := min(len(k)-1, len(s)); l >= 4 && l > n; l-- {
			if strings.HasSuffix(s, k[:l]) {
				n = l
				break
			}
		}
	}
	return n
}

// String redacts s.
func (r *Redactor) String(s string) string {
	if r != nil {
		r.mu.RLock()
		for _, k := range r.secrets {
			s = strings.ReplaceAll(s, k, Mask)
		}
		r.mu.RUnlock()
	}
	return String(s)
}

// Error wraps err so that its text is redacted; nil stays nil.
func (r *Redactor) Error(err error) error {
	if err == nil {
		return nil
	}
	if _, done := err.(*redacted); done {
		return err
	}
	return &redacted{err: err, r: r}
}

// Error wraps err so that its text has the shapes and the given secret
// values redacted; errors.Is and errors.As still see err.
func Error(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	return New(secrets...).Error(err)
}

type redacted struct {
	err error
	r   *Redactor
}

func (e *redacted) Error() string { return e.r.String(e.err.Error()) }
func (e *redacted) Unwrap() error { return e.err }

// Writer returns w with every write redacted. zerolog writes one event per
// Write, so a secret never straddles two writes.
func (r *Redactor) Writer(w io.Writer) io.Writer { return &writer{w: w, r: r} }

type writer struct {
	w io.Writer
	r *Redactor
}

func (w *writer) Write(p []byte) (int, error) {
	out := w.r.String(string(p))
	if _, err := io.WriteString(w.w, out); err != nil {
		return 0, err
	}
	return len(p), nil
}
