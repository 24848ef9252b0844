package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrInvalid is wrapped by every error this package returns: the configuration cannot be used.
var ErrInvalid = errors.New("invalid configuration")

// Error is one configuration problem. Its message reads "file:line: key: what is wrong and what to do";
// the line or key is left out when unknown.
type Error struct {
	File string // the config file name as given to Load or LoadBytes; "" for a Config built in code
	Line int    // 1-based; 0 when unknown
	Key  string // dotted key path, e.g. discord.threadBindings.idleHours or agents[1].id; "" for the whole file
	Msg  string

	cause error // an underlying error, e.g. fs.ErrNotExist
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			b.WriteString(":" + strconv.Itoa(e.Line))
		}
		b.WriteString(": ")
	} else if e.Line > 0 {
		b.WriteString("line " + strconv.Itoa(e.Line) + ": ")
	}
	if e.Key != "" {
		b.WriteString(e.Key + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns ErrInvalid and the underlying cause, if any.
func (e *Error) Unwrap() []error {
	if e.cause != nil {
		return []error{ErrInvalid, e.cause}
	}
	return []error{ErrInvalid}
}

// source remembers where values came from, so validation can name lines and unset variables.
type source struct {
	file    string
	lines   map[string]int      // key path -> line of its value
	unset   map[string][]string // key path -> ${VAR}s it referenced that were unset or empty
	secrets []string            // values that must never appear in a message
}

// errAt builds an error for key path, with the line of the path or of its nearest ancestor that
// appeared in the file.
func (s *source) errAt(path, format string, args ...any) *Error {
	e := &Error{Key: path, Msg: fmt.Sprintf(format, args...)}
	if s == nil {
		return e
	}
	e.File = s.file
	for p := path; p != ""; p = parentPath(p) {
		if line, ok := s.lines[p]; ok {
			e.Line = line
			break
		}
	}
	e.Msg = s.scrub(e.Msg)
	return e
}

// scrub removes every configured secret from msg.
func (s *source) scrub(msg string) string {
	if s == nil {
		return msg
	}
	for _, secret := range s.secrets {
		if len(secret) >= 8 { // shorter values are placeholders, and replacing them would garble messages
			msg = strings.ReplaceAll(msg, secret, "[redacted]")
		}
	}
	return msg
}

// unsetHint explains an empty value that came from unset environment variables.
func (s *source) unsetHint(path string) string {
	if s == nil || len(s.unset[path]) == 0 {
		return ""
	}
	vars := s.unset[path]
	if len(vars) == 1 {
		return " (it is empty because the environment variable " + vars[0] + " is unset or empty)"
	}
	return " (it is empty because the environment variables " + strings.Join(vars, ", ") + " are unset or empty)"
}

// parentPath strips the last element of a key path: "a.b[2]" -> "a.b", "a.b" -> "a", "a" -> "".
func parentPath(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i < 0 {
		return ""
	}
	return p[:i]
}

// show quotes a value for a message, or describes it when it is too long to be a typo worth echoing
// (long values are the ones most likely to be secrets).
func show(v string) string {
	const maxShown = 40
	if len(v) > maxShown {
		return fmt.Sprintf("a %d-character value", len(v))
	}
	return strconv.Quote(v)
}
