package console

import (
	"net"
	"net/http"
	"strings"
)

// GuardOptions configure Guard.
type GuardOptions struct {
	// Listen is http.listen; its host, when it is a name or a specific
	// address, is an accepted Host besides the loopback names.
	Listen string
	// Token is http.token; "" means none.
	Token string
	// Open are the paths served without the token (probes: /healthz,
	// /readyz). Everything else needs it when a token is set.
	Open []string
}

// Guard wraps the bot's whole HTTP surface (console, /inspect, /metrics,
// /backup, probes) with the two checks every request passes:
//
//   - Host allowlist (DNS rebinding): without a token, a request is served
//     only when its Host is an IP literal, "localhost", or the configured
//     listen host. A web page the operator opens cannot read the console
//     through a name that resolves to 127.0.0.1, because its requests carry
//     that name in Host. With a token set any Host is accepted: a rebound
//     page cannot send the token (the browser keeps credentials per origin).
//   - Token: when set, every path but the Open ones needs
//     "Authorization: Bearer <token>" or Basic auth with the token as the
//     password, compared in constant time (/metrics included).
func Guard(o GuardOptions, next http.Handler) http.Handler {
	listenHost := ""
	if h, _, err := net.SplitHostPort(o.Listen); err == nil {
		listenHost = strings.ToLower(strings.Trim(h, "[]"))
	}
	open := map[string]bool{}
	for _, p := range o.Open {
		open[p] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o.Token == "" && !hostAllowed(r.Host, listenHost) {
			http.Error(w, "misdirected request: this server answers only to its loopback address or its configured http.listen host (set http.token to serve other names)", http.StatusMisdirectedRequest)
			return
		}
		if o.Token != "" && !open[r.URL.Path] && !authorized(r, o.Token) {
			w.Header().Set("WWW-Authenticate", `Basic realm="agentbot console", charset="UTF-8"`)
			http.Error(w, "unauthorized: send Authorization: Bearer <http.token> (or HTTP Basic auth with the token as the password)", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hostAllowed reports whether a Host header names this server in a way no
// other origin can: an IP literal (a rebinding attack needs a DNS name),
// "localhost", or the configured listen host.
func hostAllowed(hostport, listenHost string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.Trim(host, "[]"))
	if host == "" {
		return false
	}
	if net.ParseIP(host) != nil || host == "localhost" {
		return true
	}
	return listenHost != "" && host == listenHost
}
