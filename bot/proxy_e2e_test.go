package bot

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/config"
)

// restProxy is a stand-in for a shared Discord REST proxy (nirn-proxy):
// a reverse proxy under a path prefix that stamps every request it
// forwards and logs it.
type restProxy struct {
	srv    *httptest.Server
	mu     sync.Mutex
	paths  []string // forwarded, as the upstream sees them
	misses []string // requests outside the prefix (not forwarded)
}

const (
	proxyPrefix = "/discord-proxy"
	proxyHeader = "X-Test-Rest-Proxy"
)

func newRESTProxy(t *testing.T, upstream string) *restProxy {
	t.Helper()
	target, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	p := &restProxy{}
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.URL.Path = strings.TrimPrefix(r.In.URL.Path, proxyPrefix)
		r.Out.URL.RawPath = ""
		r.Out.Header.Set(proxyHeader, "1")
		p.mu.Lock()
		p.paths = append(p.paths, r.In.Method+" "+r.Out.URL.Path)
		p.mu.Unlock()
	}}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, proxyPrefix+"/") {
			p.mu.Lock()
			p.misses = append(p.misses, r.Method+" "+r.URL.Path)
			p.mu.Unlock()
			http.NotFound(w, r)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *restProxy) log() (paths, misses []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.paths), slices.Clone(p.misses)
}

// TestRESTThroughProxy: with discord.apiURL set to a REST proxy (with a
// path prefix), every REST call the bot makes, from GET /gateway at
// connect to replies and interaction callbacks, reaches Discord through
// the proxy; the gateway websocket still goes where GET /gateway says.
func TestRESTThroughProxy(t *testing.T) {
	t.Parallel()
	var proxy *restProxy
	h := startBot(t, nil, func(c *config.Config) {
		proxy = newRESTProxy(t, c.Discord.APIURL) // the harness set it to the emulator
		c.Discord.APIURL = proxy.srv.URL + proxyPrefix
	})
	adSay(t, h, h.general.ID, adMention(h)+"via the proxy")
	if _, err := h.emu.WaitMessages(t.Context(), h.general.ID, 2); err != nil {
		t.Fatal(err)
	}
	in := adInvoke(t, h, h.general.ID, "agents")
	adResponded(t, h, in)
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}

	reqs := h.emu.Requests()
	paths, misses := proxy.log()
	if len(misses) != 0 {
		t.Errorf("requests outside the proxy prefix: %v", misses)
	}
	var got []string
	for _, q := range reqs {
		got = append(got, q.Method+" "+discordtest.APIPrefix+q.Path)
		if q.Header.Get(proxyHeader) != "1" {
			t.Errorf("%s %s reached the emulator without the proxy", q.Method, q.Path)
		}
	}
	slices.Sort(got)
	slices.Sort(paths)
	if !slices.Equal(got, paths) {
		t.Errorf("emulator saw\n  %v\nproxy forwarded\n  %v", got, paths)
	}
	for _, route := range []struct{ method, route string }{
		{"GET", "/gateway"}, {"GET", "/gateway/bot"}, {"PUT", commandsRoute},
		{"POST", "/channels/{channel_id}/messages"},
		{"POST", "/interactions/{interaction_id}/{interaction_token}/callback"},
	} {
		if len(h.emu.RequestsTo(route.method, route.route)) == 0 {
			t.Errorf("no %s %s: the test does not cover it", route.method, route.route)
		}
	}
	// The websocket went straight to the URL GET /gateway returned.
	if st := h.emu.GatewayStats(); st.Identifies != 1 {
		t.Errorf("%d identifies on the emulator's gateway, want 1", st.Identifies)
	}
}
