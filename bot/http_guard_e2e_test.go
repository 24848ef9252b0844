package bot

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentbot/agentbot/config"
)

// TestHTTPSurfaceGuarded (issue 26, item 5): the running bot's console and
// /inspect do not answer a request whose Host is a DNS name other than the
// listen host (a page the operator opens, rebound to 127.0.0.1), and with
// http.token set /metrics and /inspect need it while the probes stay open.
func TestHTTPSurfaceGuarded(t *testing.T) {
	t.Parallel()
	for _, token := range []string{"", "probe-token-123"} {
		h := startBot(t, nil, func(c *config.Config) { c.HTTP.Listen = "127.0.0.1:0"; c.HTTP.Token = token })
		var addr string
		select {
		case addr = <-h.app.httpAddr:
		case <-time.After(10 * time.Second):
			t.Fatal("the HTTP server did not start")
		}
		adSay(t, h, h.general.ID, adMention(h)+"my secret plan")
		if _, err := h.emu.WaitMessages(t.Context(), h.general.ID, 2); err != nil {
			t.Fatal(err)
		}
		get := func(path, host, auth string) (int, string) {
			t.Helper()
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if host != "" {
				req.Host = host
			}
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		auth := ""
		if token != "" {
			auth = "Bearer " + token
		}
		key := "agent:main:discord:channel:" + h.general.ID
		if token == "" {
			for _, p := range []string{"/", "/sessions/" + key, "/inspect/transcript?arg=" + key, "/metrics", "/healthz"} {
				if code, body := get(p, "rebind.attacker.test", ""); code != http.StatusMisdirectedRequest || strings.Contains(body, "secret plan") {
					t.Errorf("Host rebind.attacker.test GET %s = %d (%d bytes), want 421 without the transcript", p, code, len(body))
				}
			}
			if code, body := get("/inspect/transcript?arg="+key, "", ""); code != 200 || !strings.Contains(body, "secret plan") {
				t.Errorf("GET /inspect/transcript on the loopback address = %d (%d bytes)", code, len(body))
			}
		} else {
			for _, p := range []string{"/metrics", "/inspect/transcript?arg=" + key, "/"} {
				if code, _ := get(p, "", ""); code != http.StatusUnauthorized {
					t.Errorf("GET %s without the token = %d, want 401", p, code)
				}
				if code, _ := get(p, "", "Bearer "+token[:len(token)-1]); code != http.StatusUnauthorized {
					t.Errorf("GET %s with a prefix of the token = %d, want 401", p, code)
				}
			}
			for _, p := range []string{"/healthz", "/readyz"} {
				if code, _ := get(p, "", ""); code != 200 {
					t.Errorf("probe GET %s without the token = %d, want 200", p, code)
				}
			}
		}
		if code, body := get("/metrics", "", auth); code != 200 || !strings.Contains(body, "agentbot_") {
			t.Errorf("GET /metrics with access = %d", code)
		}
		finishBot(t, h, h.general.ID)
	}
}
