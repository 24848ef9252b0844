package console

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestGuard: a rebinding page's Host (a DNS name that is not the listen
// host) is refused without a token; IP literals, localhost and the listen
// host are served; with a token every path but the open probes needs it,
// /metrics included, and a wrong or prefix-only token is refused.
func TestGuard(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	tests := []struct {
		name, listen, token, host, path, auth string
		want                                  int
	}{
		{"loopback ip", "127.0.0.1:9464", "", "127.0.0.1:9464", "/", "", 200},
		{"localhost", "127.0.0.1:9464", "", "localhost:9464", "/sessions", "", 200},
		{"ipv6 loopback", "[::1]:9464", "", "[::1]:9464", "/", "", 200},
		{"rebinding name", "127.0.0.1:9464", "", "evil.example:9464", "/sessions", "", 421},
		{"rebinding name inspect", "127.0.0.1:9464", "", "attacker.test", "/inspect/transcript", "", 421},
		{"rebinding name probe", "127.0.0.1:9464", "", "attacker.test", "/healthz", "", 421},
		{"localhost lookalike", "127.0.0.1:9464", "", "localhost.evil.example", "/", "", 421},
		{"listen host name", "bot.lan:9464", "", "bot.lan:9464", "/", "", 200},
		{"listen host name case", "bot.lan:9464", "", "BOT.LAN", "/", "", 200},
		{"empty host", "127.0.0.1:9464", "", "", "/", "", 421},
		{"token missing", "0.0.0.0:9464", "s3cret", "bot.example", "/", "", 401},
		{"token metrics missing", "0.0.0.0:9464", "s3cret", "10.0.0.5:9464", "/metrics", "", 401},
		{"token metrics ok", "0.0.0.0:9464", "s3cret", "10.0.0.5:9464", "/metrics", "Bearer s3cret", 200},
		{"token wrong", "0.0.0.0:9464", "s3cret", "bot.example", "/", "Bearer s3cre", 401},
		{"token any host", "0.0.0.0:9464", "s3cret", "bot.example", "/", "Bearer s3cret", 200},
		{"token probe open", "0.0.0.0:9464", "s3cret", "bot.example", "/healthz", "", 200},
		{"token readyz open", "0.0.0.0:9464", "s3cret", "bot.example", "/readyz", "", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := Guard(GuardOptions{Listen: tt.listen, Token: tt.token, Open: []string{"/healthz", "/readyz"}}, ok)
			r := httptest.NewRequest(http.MethodGet, "http://x"+tt.path, nil)
			r.Host = tt.host
			if tt.auth != "" {
				r.Header.Set("Authorization", tt.auth)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tt.want {
				t.Fatalf("%s %s (Host %q) = %d, want %d: %s", r.Method, tt.path, tt.host, w.Code, tt.want, w.Body.String())
			}
		})
	}
}
