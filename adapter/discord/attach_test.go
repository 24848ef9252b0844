package discord

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/transcript"
)

// Fetch reads only Discord's CDN (or the configured API host: a proxy or
// the emulator), sends no bot token, keeps to the size cap and never puts
// the signed URL in an error.
func TestFetchOnlyCDNWithinLimits(t *testing.T) {
	var sawAuth bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawAuth = sawAuth || r.Header.Get("Authorization") != ""
		switch r.URL.Path {
		case "/attachments/1/2/ok.txt":
			_, _ = w.Write([]byte("hello"))
		case "/attachments/1/3/big.txt":
			_, _ = w.Write([]byte(strings.Repeat("x", 100)))
		case "/redirect":
			http.Redirect(w, r, "http://169.254.169.254/latest", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	a := newTestClient(t, ClientOptions{Token: "secret-token", APIURL: srv.URL, RetryBackoff: time.Millisecond}, ClientDeps{})
	ctx := context.Background()
	got, err := a.Fetch(ctx, transcript.Attachment{Filename: "ok.txt", URL: srv.URL + "/attachments/1/2/ok.txt?hm=signature"}, 10)
	if err != nil || string(got) != "hello" {
		t.Fatalf("Fetch = %q, %v", got, err)
	}
	if sawAuth {
		t.Fatal("the bot token was sent to the CDN")
	}
	for _, tc := range []struct{ name, url string }{
		{"over the cap", srv.URL + "/attachments/1/3/big.txt?hm=signature"},
		{"another host", "http://169.254.169.254/attachments/x?hm=signature"},
		{"http CDN", "http://cdn.discordapp.com/attachments/x?hm=signature"},
		{"redirect off the CDN", srv.URL + "/redirect?hm=signature"},
		{"not found", srv.URL + "/attachments/none?hm=signature"},
	} {
		_, err := a.Fetch(ctx, transcript.Attachment{Filename: "f.txt", URL: tc.url}, 10)
		if err == nil {
			t.Errorf("%s: fetched", tc.name)
			continue
		}
		if strings.Contains(err.Error(), "signature") {
			t.Errorf("%s: error %q carries the signed URL", tc.name, err)
		}
	}
}
