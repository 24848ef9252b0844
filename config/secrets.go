package config

import (
	"net/url"
	"regexp"
	"strings"
)

// Secrets lists the configured values that must never leave the process
// (invariant 14): the bot token, the console token, every model's API key,
// and the store DSN with its password. cmd/bot gives them to the one
// redactor (internal/redact) that every log line passes through.
func (c *Config) Secrets() []string {
	out := []string{c.Discord.Token, c.HTTP.Token}
	for _, m := range c.Models {
		out = append(out, m.APIKey)
	}
	for _, s := range c.MCP.Servers {
		// Env and header values carry API keys; which ones cannot be told
		// apart, so all are kept out (values under redact.MinSecretLen are not).
		for _, v := range s.Env {
			out = append(out, v)
		}
		for _, v := range s.Headers {
			out = append(out, v)
			if _, cred, ok := strings.Cut(v, " "); ok {
				out = append(out, cred) // "Bearer <token>": the token alone too
			}
		}
	}
	out = append(out, c.acpSecrets()...)
	out = append(out, c.Matrix.AccessToken, c.Matrix.AppService.ASToken)
	if c.Store.DSN != "" {
		out = append(out, c.Store.DSN)
		if pw := dsnPassword(c.Store.DSN); pw != "" {
			out = append(out, pw, url.QueryEscape(pw), url.PathEscape(pw))
		}
	}
	kept := out[:0]
	for _, s := range out {
		if s != "" {
			kept = append(kept, s)
		}
	}
	return kept
}

var keywordPassword = regexp.MustCompile(`(?i)(?:^|\s)password\s*=\s*('(?:[^'\\]|\\.)*'|\S+)`)

// dsnPassword extracts the password of a URL DSN
// (postgres://user:pw@host/db, or ?password=pw) or a keyword DSN
// (host=db password=pw).
func dsnPassword(dsn string) string {
	if strings.Contains(dsn, "://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return ""
		}
		if pw, ok := u.User.Password(); ok {
			return pw
		}
		return u.Query().Get("password")
	}
	m := keywordPassword.FindStringSubmatch(dsn)
	if m == nil {
		return ""
	}
	return strings.Trim(m[1], "'")
}
