package discord

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/agentbot/agentbot/internal/redact"
)

// tokenSource holds the bot token; every REST call reads the newest value,
// so a token rotated by a config reload applies without rebuilding the
// thread and webhook managers.
type tokenSource struct{ v atomic.Value }

func (t *tokenSource) Set(tok string) { t.v.Store(tok) }

func (t *tokenSource) Get() string {
	s, _ := t.v.Load().(string)
	return s
}

// transport rewrites Discord REST requests to the configured API base (a
// REST proxy or the test emulator) and stamps the newest bot token. It
// never changes discordgo's global endpoint variables.
type transport struct {
	base  http.RoundTripper
	api   *url.URL // nil: talk to discord.com
	token *tokenSource
}

func newTransport(apiURL string, token *tokenSource, base http.RoundTripper) (*transport, error) {
	if base == nil {
		base = http.DefaultTransport
	}
	t := &transport{base: base, token: token}
	if apiURL != "" {
		u, err := url.Parse(apiURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("discord.apiURL %q: want an http(s) URL such as http://127.0.0.1:8080", apiURL)
		}
		t.api = u
	}
	return t, nil
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	if t.api != nil && (r.URL.Host == "discord.com" || strings.HasSuffix(r.URL.Host, ".discord.com")) {
		r.URL.Scheme = t.api.Scheme
		r.URL.Host = t.api.Host
		if p := strings.TrimSuffix(t.api.Path, "/"); p != "" {
			r.URL.Path = p + r.URL.Path
		}
		r.Host = t.api.Host
	}
	// Webhook executions and interaction callbacks authenticate by their
	// URL token; every other call carries the newest bot token.
	if r.Header.Get("Authorization") != "" {
		if tok := t.token.Get(); tok != "" {
			r.Header.Set("Authorization", "Bot "+tok)
		}
	}
	return t.base.RoundTrip(r)
}

// restError is the one exit of a discordgo REST failure (classify applies
// it, and so every retried call): on a network error or a timeout Go's
// http.Client returns a *url.Error whose text holds the whole request URL,
// and webhook and interaction URLs carry their token
// (/webhooks/{id}/{token}, /interactions/{id}/{token}/callback,
// /webhooks/{app}/{token}/messages/@original). The returned error's text
// has those tokens (and any other credential shape, see internal/redact)
// replaced; errors.Is/As still see the original, so classification is
// unchanged. The transport itself cannot do this: http.Client builds the
// url.Error from the caller's request after RoundTrip returns.
func restError(err error) error { return redact.Error(err) }
