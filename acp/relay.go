package acp

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/rs/zerolog"
)

// The agent's way to its model endpoint from a sandbox without network
// (docs/DECISIONS.md 241): inside, a relay (the bot's own program,
// `sandbox-relay`) listens on the namespace's loopback at RelayListen and
// forwards each connection to a Unix socket bound in from the host; the
// agent's HTTPS_PROXY points at it. On the host, an endpoint proxy serves
// that socket: HTTP CONNECT to an allowed host:port only, so the agent
// reaches its model endpoint and nothing else.
const (
	// RelayListen is the relay's address inside the sandbox.
	RelayListen = "127.0.0.1:3128"
	// relayDir is where the host's socket directory appears inside.
	relayDir    = "/tmp/.agentbot-net"
	relaySocket = "proxy.sock"
)

// RelayMain runs the relay: args are SOCKET -- PROGRAM ARGS...; it starts
// the program with its own stdio and environment, relays RelayListen to
// SOCKET while it runs, passes SIGTERM and SIGINT on, and returns its exit
// status.
func RelayMain(args []string) int {
	if len(args) < 3 || args[1] != "--" {
		fmt.Fprintln(os.Stderr, "usage: sandbox-relay SOCKET -- PROGRAM [ARGS...]")
		return 2
	}
	sock, argv := args[0], args[2:]
	ln, err := net.Listen("tcp", RelayListen)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sandbox-relay: %v\n", err)
		return 1
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				u, err := net.Dial("unix", sock)
				if err != nil {
					c.Close()
					return
				}
				splice(c, u)
			}()
		}
	}()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "sandbox-relay: %v\n", err)
		return 127
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		for s := range sigs {
			_ = cmd.Process.Signal(s)
		}
	}()
	err = cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return 1
	}
	return 0
}

// splice copies both ways until either side ends.
func splice(a, b net.Conn) {
	var once sync.Once
	done := func() { once.Do(func() { a.Close(); b.Close() }) }
	go func() { _, _ = io.Copy(a, b); done() }()
	_, _ = io.Copy(b, a)
	done()
}

// endpointProxy is the host side: CONNECT to the allowed endpoints only.
type endpointProxy struct {
	dir   string
	ln    net.Listener
	allow map[string]bool
	log   zerolog.Logger
	wg    sync.WaitGroup
}

// startEndpointProxy listens on a fresh socket (in a private directory
// under the system's temp dir, short enough for a socket path).
func startEndpointProxy(allow []string, log zerolog.Logger) (*endpointProxy, error) {
	dir, err := os.MkdirTemp("", "agentbot-net-")
	if err != nil {
		return nil, fmt.Errorf("endpoint proxy: %w", err)
	}
	ln, err := net.Listen("unix", filepath.Join(dir, relaySocket))
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("endpoint proxy: %w", err)
	}
	p := &endpointProxy{dir: dir, ln: ln, allow: map[string]bool{}, log: log}
	for _, a := range allow {
		p.allow[strings.ToLower(a)] = true
	}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

func (p *endpointProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() { defer p.wg.Done(); p.handle(c) }()
	}
}

func (p *endpointProxy) handle(c net.Conn) {
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		c.Close()
		return
	}
	target := strings.ToLower(req.Host)
	if req.Method != http.MethodConnect || !p.allow[target] {
		p.log.Warn().Str("method", req.Method).Str("target", target).Msg("sandboxed agent: connection refused (not its model endpoint)")
		_, _ = io.WriteString(c, "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		c.Close()
		return
	}
	u, err := net.Dial("tcp", target)
	if err != nil {
		_, _ = io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		c.Close()
		return
	}
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		c.Close()
		u.Close()
		return
	}
	if n := br.Buffered(); n > 0 { // the client spoke first
		b, _ := br.Peek(n)
		_, _ = u.Write(b)
	}
	splice(c, u)
}

func (p *endpointProxy) close() {
	p.ln.Close()
	p.wg.Wait()
	os.RemoveAll(p.dir)
}

// DefaultEndpoints are the model endpoints a sandboxed agent may reach
// besides those its env names.
var DefaultEndpoints = []string{"generativelanguage.googleapis.com:443", "api.anthropic.com:443"}

// endpointsOf is what a sandboxed agent may reach: DefaultEndpoints and
// every http(s) URL in its configured env (a base URL override).
func endpointsOf(env map[string]string) []string {
	set := map[string]bool{}
	for _, e := range DefaultEndpoints {
		set[e] = true
	}
	for _, v := range env {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
			continue
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		set[strings.ToLower(net.JoinHostPort(u.Hostname(), port))] = true
	}
	out := make([]string, 0, len(set))
	for e := range set {
		out = append(out, e)
	}
	sort.Strings(out)
	return out
}

// proxyEnv points an agent's HTTP clients at the relay.
func proxyEnv() []string {
	p := "http://" + RelayListen
	return []string{"HTTPS_PROXY=" + p, "HTTP_PROXY=" + p, "https_proxy=" + p, "http_proxy=" + p, "NO_PROXY=", "no_proxy="}
}
