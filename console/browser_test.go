package console

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/agentbot/agentbot/core/audit"
)

// chromiumPath finds a Chromium (Debian's package installs "chromium").
func chromiumPath() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// TestBrowserEveryPage loads every console page in headless Chromium over
// the DevTools protocol, fails on any console message of level error or
// warning, uncaught exception, failed or non-2xx load, and any internal link
// that does not answer 200, and saves a full-page screenshot of each page
// in the test's artifact directory (kept with `go test -artifacts
// -outputdir DIR`; the path is logged).
//
// Without a Chromium the test skips, unless CI is set: there it fails, as
// .ci/run installs Debian's chromium.
func TestBrowserEveryPage(t *testing.T) {
	bin := chromiumPath()
	if bin == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is not installed: .ci/run installs it (apt-get install -y chromium); the browser test must run in CI")
		}
		t.Skip("chromium is not installed (apt-get install -y chromium); skipping the real-browser test outside CI")
	}
	st := openStore(t)
	seed(t, st, 120, 130, 80)
	const token = httpToken
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	// The conversation view audits channel 1000 against a display that
	// differs from the transcript (chatDisplay): the screenshot shows the
	// promise checked, differences highlighted.
	a := audit.New(audit.Options{}, audit.Deps{Transcripts: st, Displays: map[string]audit.Display{"discord": chatDisplay{130}}, Clock: fixedClock{}})
	New(Options{Store: st, Token: token, Now: func() time.Time { return t0 }, PageSize: 20, Audit: a.Conversation,
		Status: func() State { return State{Ready: true, Started: t0.Add(-90 * time.Minute)} }}).Mount(mux)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	base := "http://" + ln.Addr().String()

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	b := startBrowser(t, ctx, bin)
	if err := b.call(ctx, "Network.setExtraHTTPHeaders", map[string]any{"headers": map[string]string{"Authorization": "Bearer " + token}}, nil); err != nil {
		t.Fatal(err)
	}
	shots := t.ArtifactDir()
	t.Logf("screenshots in %s", shots)

	crawled := map[string]bool{}
	for i, p := range pages {
		u := base + p.path
		problems, links := b.load(t, ctx, u)
		for _, pr := range problems {
			t.Errorf("%s: %s", p.path, pr)
		}
		if p.path == "/usage" {
			checkCharts(t, ctx, b)
		}
		name := fmt.Sprintf("%02d-%s.png", i, strings.Trim(regexp.MustCompile(`[^a-zA-Z0-9]+`).ReplaceAllString(p.path, "-"), "-"))
		if name == fmt.Sprintf("%02d-.png", i) {
			name = fmt.Sprintf("%02d-overview.png", i)
		}
		if err := b.screenshot(ctx, filepath.Join(shots, name)); err != nil {
			t.Errorf("%s: screenshot: %v", p.path, err)
		}
		if len(links) == 0 {
			t.Errorf("%s: no links found", p.path)
		}
		for _, l := range links {
			if crawled[l] {
				continue
			}
			crawled[l] = true
			checkLink(t, p.path, base, l, token)
		}
	}
	t.Logf("crawled %d distinct links", len(crawled))
}

// checkLink requires internal links to answer 200 and external ones to be
// Discord channel links (not fetched: the test runs offline).
func checkLink(t *testing.T, page, base, link, token string) {
	t.Helper()
	if strings.HasPrefix(link, "https://discord.com/channels/") {
		return
	}
	if !strings.HasPrefix(link, base+"/") {
		t.Errorf("%s links outside the console: %s", page, link)
		return
	}
	req, _ := http.NewRequest(http.MethodGet, link, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("%s: link %s: %v", page, link, err)
		return
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("%s: broken link %s: %d", page, link, resp.StatusCode)
	}
}

// ---- a minimal DevTools protocol client ----

type cdpMsg struct {
	ID        int64           `json:"id,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *struct{ Message string }
	SessionID string `json:"sessionId,omitempty"`
}

type browser struct {
	conn    *websocket.Conn
	session string
	wmu     sync.Mutex
	mu      sync.Mutex
	next    int64
	waiting map[int64]chan cdpMsg
	events  chan cdpMsg
}

func startBrowser(t *testing.T, ctx context.Context, bin string) *browser {
	t.Helper()
	profile, err := os.MkdirTemp("", "console-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run", "--no-default-browser-check",
		"--disable-extensions", "--disable-background-networking", "--disable-sync", "--disable-dev-shm-usage", "--hide-scrollbars",
		"--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1", "--user-data-dir="+profile, "about:blank")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	// Registered first, so it runs last: after Browser.close (below) the
	// browser and its helpers get a moment to exit before the profile goes.
	t.Cleanup(func() {
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		for range 20 {
			if os.RemoveAll(profile) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	wsURL := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if _, after, ok := strings.Cut(sc.Text(), "DevTools listening on "); ok {
				wsURL <- strings.TrimSpace(after)
			}
		}
	}()
	var ws string
	select {
	case ws = <-wsURL:
	case <-time.After(90 * time.Second): // a first start on a loaded 2-core machine can take half a minute
		t.Fatal("chromium did not print its DevTools address within 90s")
	}
	conn, _, err := websocket.DefaultDialer.DialContext(ctx, ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	b := &browser{conn: conn, waiting: map[int64]chan cdpMsg{}, events: make(chan cdpMsg, 1024)}
	go b.readLoop()
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_ = b.callOn(cctx, "", "Browser.close", nil, nil)
	})
	var target struct{ TargetID string }
	if err := b.callOn(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &target); err != nil {
		t.Fatal(err)
	}
	var att struct{ SessionID string }
	if err := b.callOn(ctx, "", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &att); err != nil {
		t.Fatal(err)
	}
	b.session = att.SessionID
	for _, m := range []string{"Page.enable", "Runtime.enable", "Log.enable", "Network.enable"} {
		if err := b.call(ctx, m, nil, nil); err != nil {
			t.Fatal(m, err)
		}
	}
	if err := b.call(ctx, "Emulation.setDeviceMetricsOverride", map[string]any{"width": 1400, "height": 900, "deviceScaleFactor": 1, "mobile": false}, nil); err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *browser) readLoop() {
	for {
		var m cdpMsg
		if err := b.conn.ReadJSON(&m); err != nil {
			close(b.events)
			return
		}
		if m.ID != 0 {
			b.mu.Lock()
			ch := b.waiting[m.ID]
			delete(b.waiting, m.ID)
			b.mu.Unlock()
			if ch != nil {
				ch <- m
			}
			continue
		}
		select {
		case b.events <- m:
		default: // a test that stops reading events must not block responses
		}
	}
}

func (b *browser) call(ctx context.Context, method string, params, out any) error {
	return b.callOn(ctx, b.session, method, params, out)
}

func (b *browser) callOn(ctx context.Context, session, method string, params, out any) error {
	b.mu.Lock()
	b.next++
	id := b.next
	ch := make(chan cdpMsg, 1)
	b.waiting[id] = ch
	b.mu.Unlock()
	msg := map[string]any{"id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if session != "" {
		msg["sessionId"] = session
	}
	b.wmu.Lock()
	err := b.conn.WriteJSON(msg)
	b.wmu.Unlock()
	if err != nil {
		return err
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return fmt.Errorf("%s: %s", method, m.Error.Message)
		}
		if out != nil {
			return json.Unmarshal(m.Result, out)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// load navigates to u, waits for the load event and a quiet moment, and
// returns what went wrong (console errors and warnings, exceptions, failed
// or non-2xx loads) and the absolute href of every <a> on the page.
func (b *browser) load(t *testing.T, ctx context.Context, u string) (problems, links []string) {
	t.Helper()
	for len(b.events) > 0 { // drop events of the previous page
		<-b.events
	}
	var nav struct{ ErrorText string }
	if err := b.call(ctx, "Page.navigate", map[string]any{"url": u}, &nav); err != nil {
		return []string{err.Error()}, nil
	}
	if nav.ErrorText != "" {
		problems = append(problems, "navigation: "+nav.ErrorText)
	}
	loaded := false
	quiet := time.NewTimer(10 * time.Second)
	defer quiet.Stop()
	for done := false; !done; {
		select {
		case m, ok := <-b.events:
			if !ok {
				return append(problems, "browser connection closed"), nil
			}
			if m.SessionID != b.session {
				continue
			}
			problems = append(problems, eventProblem(m)...)
			if m.Method == "Page.loadEventFired" {
				loaded = true
				quiet.Reset(300 * time.Millisecond) // late console messages
			}
		case <-quiet.C:
			done = true
		case <-ctx.Done():
			return append(problems, ctx.Err().Error()), nil
		}
	}
	if !loaded {
		problems = append(problems, "no load event within 10s")
	}
	var res struct {
		Result struct{ Value string }
	}
	err := b.call(ctx, "Runtime.evaluate", map[string]any{"returnByValue": true,
		"expression": `JSON.stringify(Array.from(document.querySelectorAll('a[href]'), a => a.href))`}, &res)
	if err != nil {
		return append(problems, err.Error()), nil
	}
	if err := json.Unmarshal([]byte(res.Result.Value), &links); err != nil {
		problems = append(problems, "links: "+err.Error())
	}
	return problems, links
}

// eventProblem turns a DevTools event into the problems it reports.
func eventProblem(m cdpMsg) []string {
	switch m.Method {
	case "Runtime.consoleAPICalled":
		var p struct {
			Type string
			Args []struct{ Value any }
		}
		_ = json.Unmarshal(m.Params, &p)
		if p.Type == "error" || p.Type == "warning" || p.Type == "assert" {
			return []string{fmt.Sprintf("console.%s: %v", p.Type, p.Args)}
		}
	case "Runtime.exceptionThrown":
		return []string{"uncaught exception: " + string(m.Params)}
	case "Log.entryAdded":
		var p struct {
			Entry struct{ Level, Source, Text, URL string }
		}
		_ = json.Unmarshal(m.Params, &p)
		if p.Entry.Level == "error" || p.Entry.Level == "warning" {
			return []string{fmt.Sprintf("console %s (%s): %s %s", p.Entry.Level, p.Entry.Source, p.Entry.Text, p.Entry.URL)}
		}
	case "Network.responseReceived":
		var p struct {
			Response struct {
				URL    string
				Status int
			}
		}
		_ = json.Unmarshal(m.Params, &p)
		if p.Response.Status >= 400 {
			return []string{fmt.Sprintf("load %s: HTTP %d", p.Response.URL, p.Response.Status)}
		}
	case "Network.loadingFailed":
		var p struct{ ErrorText, BlockedReason string }
		_ = json.Unmarshal(m.Params, &p)
		return []string{"load failed: " + p.ErrorText + " " + p.BlockedReason}
	}
	return nil
}

// screenshot saves the whole page (up to 6000px tall) as a PNG.
func (b *browser) screenshot(ctx context.Context, path string) error {
	var lm struct {
		CSSContentSize struct{ Width, Height float64 } `json:"cssContentSize"`
	}
	if err := b.call(ctx, "Page.getLayoutMetrics", nil, &lm); err != nil {
		return err
	}
	w, h := max(lm.CSSContentSize.Width, 1400), min(max(lm.CSSContentSize.Height, 300), 6000)
	var shot struct{ Data string }
	if err := b.call(ctx, "Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true,
		"clip": map[string]any{"x": 0, "y": 0, "width": w, "height": h, "scale": 1}}, &shot); err != nil {
		return err
	}
	png, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil {
		return err
	}
	if len(png) < 1000 {
		return fmt.Errorf("screenshot is only %d bytes", len(png))
	}
	return os.WriteFile(path, png, 0o644)
}
