package redact

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

func TestString(t *testing.T) {
	const (
		hookTok = "AbC-dEf_123ghIJKlmnOPqrstUVwxyz0123456789abcdefGHIJKLmnopqrstu"
		inTok   = "aW50ZXJhY3Rpb246MTIzNDU2Nzg5OmFiY2RlZmdo.xyz"
		botTok  = "MTE5ODg0NzI1NjQ4NzQ3NzE5Mg.GxYz12.abcdefghijklmnopqrstuvwxyz0123"
	)
	tests := []struct {
		name, in, want string
		gone           []string
	}{
		{"webhook execute", `Post "https://discord.com/api/v9/webhooks/123/` + hookTok + `?wait=true": dial tcp: connection refused`,
			`Post "https://discord.com/api/v9/webhooks/123/[redacted]?wait=true": dial tcp: connection refused`, []string{hookTok}},
		{"interaction callback", `Post "http://127.0.0.1:1/api/v9/interactions/99/tok_en-1.2/callback": context deadline exceeded`,
			`Post "http://127.0.0.1:1/api/v9/interactions/99/[redacted]/callback": context deadline exceeded`, []string{"tok_en-1.2"}},
		{"original edit", `Patch "https://discord.com/api/v9/webhooks/55/` + inTok + `/messages/@original": EOF`,
			`Patch "https://discord.com/api/v9/webhooks/55/[redacted]/messages/@original": EOF`, []string{inTok}},
		{"json-escaped url", `{"error":"Post \"http://x/webhooks/1/secrettoken\": EOF"}`, `{"error":"Post \"http://x/webhooks/1/[redacted]\": EOF"}`, []string{"secrettoken"}},
		{"bare interaction token", "token " + inTok, "token [redacted]", []string{inTok}},
		{"bot token", "auth failed for " + botTok, "auth failed for [redacted]", []string{botTok}},
		{"authorization header", "Authorization: Bot abcdefgh12345678abcdefgh", "Authorization: Bot [redacted]", []string{"abcdefgh12345678abcdefgh"}},
		{"prose after Bot", "Bot responses are cached", "Bot responses are cached", nil},
		{"bearer", "bearer sk_live_abcdefgh", "bearer [redacted]", []string{"sk_live_abcdefgh"}},
		{"dsn url", "connect postgres://bot:hunter2pw@db:5432/x failed", "connect postgres://bot:[redacted]@db:5432/x failed", []string{"hunter2pw"}},
		{"dsn keywords", "host=db user=bot password=hunter2pw dbname=x", "host=db user=bot password=[redacted] dbname=x", []string{"hunter2pw"}},
		{"api key", "invalid key sk-ant-api03-abcdefghijklmnop", "invalid key [redacted]", []string{"abcdefghijklmnop"}},
		{"url with port, no userinfo", "GET http://127.0.0.1:8080/x@y", "GET http://127.0.0.1:8080/x@y", nil},
		{"plain text", "channel 123 is archived", "channel 123 is archived", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := String(tt.in)
			if got != tt.want {
				t.Errorf("String(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
			for _, g := range tt.gone {
				if strings.Contains(got, g) {
					t.Errorf("%q still holds %q", got, g)
				}
			}
		})
	}
}

func TestRedactorKnownValues(t *testing.T) {
	r := New("short", `pa"ss\word-123`)
	r.Add("rotated-token-value")
	in := `a short pa"ss\word-123 {"k":"pa\"ss\\word-123"} rotated-token-value`
	got := r.String(in)
	want := `a short [redacted] {"k":"[redacted]"} [redacted]`
	if got != want {
		t.Fatalf("got %q want %q", got, want)
	}
}

func TestErrorKeepsChain(t *testing.T) {
	base := &url.Error{Op: "Post", URL: "https://discord.com/api/v9/webhooks/1/tokentokentoken", Err: context.DeadlineExceeded}
	err := Error(fmt.Errorf("send: %w", base), "extra-secret")
	if strings.Contains(err.Error(), "tokentokentoken") {
		t.Fatalf("token in %q", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal("errors.Is lost the cause")
	}
	var ue *url.Error
	if !errors.As(err, &ue) {
		t.Fatal("errors.As lost the url.Error")
	}
	if Error(nil) != nil {
		t.Fatal("nil error not nil")
	}
}

func TestWriterRedactsEveryLogLine(t *testing.T) {
	for _, format := range []string{"json", "console"} {
		t.Run(format, func(t *testing.T) {
			var buf bytes.Buffer
			w := New("the-bot-token-value").Writer(&buf)
			if format == "console" {
				w = zerolog.ConsoleWriter{Out: New("the-bot-token-value").Writer(&buf), NoColor: true}
			}
			log := zerolog.New(w)
			err := &url.Error{Op: "Post", URL: "http://127.0.0.1/api/v9/interactions/5/secret-interaction-tok/callback", Err: errors.New("connection refused")}
			log.Error().Err(err).Str("tok", "the-bot-token-value").Msg("send failed")
			out := buf.String()
			for _, s := range []string{"secret-interaction-tok", "the-bot-token-value"} {
				if strings.Contains(out, s) {
					t.Errorf("log line holds %q: %s", s, out)
				}
			}
			if !strings.Contains(out, "interactions/5/[redacted]/callback") {
				t.Errorf("redacted URL missing: %s", out)
			}
		})
	}
}

func TestWriterRedactsEscapedSecret(t *testing.T) {
	const secret = `p<a>ss"w\ord&1234`
	var buf bytes.Buffer
	log := zerolog.New(New(secret).Writer(&buf))
	log.Error().Str("dsn", "x "+secret+" y").Msg("connect")
	if out := buf.String(); !strings.Contains(out, `"dsn":"x [redacted] y"`) {
		t.Fatalf("want the value redacted: %s", out)
	}
}
