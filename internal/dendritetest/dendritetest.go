// Package dendritetest starts a real Matrix homeserver for tests: Dendrite (github.com/matrix-org/dendrite, the
// Apache-2.0 project; not element-hq's AGPL fork), built by `make dendrite` (run by .ci/run) into .cache/dendrite
// at the repository root. It is a test tool installed by version, never a dependency of the module.
//
// Start runs one server per call in a temporary directory on a free loopback port: configuration from
// `generate-config -ci`, federation disabled, open registration disabled (users are made by shared-secret
// registration), an optional appservice registration for persona ghosts, logs in the directory (the tail is
// printed when the test fails). The server is stopped, bounded, when the test ends; Restart stops and starts it
// again on the same directory and port (data kept).
//
// Rule: a test that needs Dendrite fails in CI (the CI environment variable is set) when the binary is missing, and
// skips elsewhere, saying how to build it. Nothing is built at test time.
package dendritetest

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/agentbot/agentbot/internal/reporoot"
)

// Dir is the install directory of the binaries, relative to the repository root.
const Dir = ".cache/dendrite/bin"

// ServerName is the Matrix server name of every test server (user ids are @name:localhost).
const ServerName = "localhost"

// How long a start may take before the test fails, and how long a stop waits after SIGTERM before SIGKILL.
const (
	startTimeout = 60 * time.Second
	stopTimeout  = 10 * time.Second
)

// AppService describes an appservice registration loaded by the server (app_service_api.config_files). Its
// namespace is the exclusive user regex @<UserPrefix>.*:localhost; the appservice's own user is SenderLocalpart.
type AppService struct {
	ID              string
	ASToken         string
	HSToken         string
	SenderLocalpart string
	UserPrefix      string
	// URL is where the server pushes transactions; empty means a closed loopback port (nothing listens: the
	// tests read through /sync, not pushes).
	URL string
}

// Options configures Start.
type Options struct {
	// AppService, when set, is registered with the server.
	AppService *AppService
}

// User is a registered account with a logged-in device.
type User struct {
	UserID      string
	AccessToken string
	DeviceID    string
	Password    string
}

// Server is a running (or stopped, between Restart's halves) Dendrite.
type Server struct {
	// URL is the client-server API base, http://127.0.0.1:PORT.
	URL string
	// Dir holds the configuration, keys, databases and log.
	Dir string

	bin          string
	addr         string
	sharedSecret string
	appService   *AppService

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
}

// Bin returns the absolute path of the Dendrite program name (dendrite, generate-config, generate-keys,
// create-account), or fails or skips tb as the package rule says.
func Bin(tb testing.TB, name string) string {
	tb.Helper()
	root, err := reporoot.Dir()
	if err != nil {
		missing(tb, "repository root (go.mod) not found: "+err.Error())
	}
	p := filepath.Join(root, Dir, name)
	if _, err := os.Stat(p); err != nil {
		missing(tb, name+" is not built under "+Dir+": run `make dendrite` (needs gcc; about 3 minutes)")
	}
	return p
}

func missing(tb testing.TB, why string) {
	tb.Helper()
	if os.Getenv("CI") != "" {
		tb.Fatalf("dendrite: %s", why)
	}
	tb.Skipf("dendrite: %s", why)
}

// Start starts a fresh server and registers its stop with tb.Cleanup.
func Start(tb testing.TB, opts Options) *Server {
	tb.Helper()
	dendrite := Bin(tb, "dendrite")
	genConfig := Bin(tb, "generate-config")
	genKeys := Bin(tb, "generate-keys")

	dir := tb.TempDir()
	s := &Server{Dir: dir, bin: dendrite, sharedSecret: randomHex(16), appService: opts.AppService}
	if out, err := exec.Command(genKeys, "-private-key", filepath.Join(dir, "matrix_key.pem")).CombinedOutput(); err != nil {
		tb.Fatalf("dendrite: generate-keys: %v: %s", err, out)
	}
	cfgOut, err := exec.Command(genConfig, "-ci", "-dir", dir, "-server", ServerName).Output()
	if err != nil {
		tb.Fatalf("dendrite: generate-config: %v", err)
	}
	cfg, err := s.configure(cfgOut)
	if err != nil {
		tb.Fatalf("dendrite: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "dendrite.yaml"), cfg, 0o600); err != nil {
		tb.Fatalf("dendrite: write config: %v", err)
	}
	port, err := freePort()
	if err != nil {
		tb.Fatalf("dendrite: free port: %v", err)
	}
	s.addr = fmt.Sprintf("127.0.0.1:%d", port)
	s.URL = "http://" + s.addr
	tb.Cleanup(func() {
		if err := s.stop(); err != nil {
			tb.Errorf("dendrite: stop: %v", err)
		}
		if tb.Failed() {
			s.dumpLog(tb)
		}
	})
	if err := s.start(); err != nil {
		s.dumpLog(tb)
		tb.Fatalf("dendrite: %v", err)
	}
	return s
}

// configure edits generate-config's YAML: federation off, our shared secret, no open registration, logs at warn
// into the directory, JetStream on disk (so a Restart loses nothing in flight), and the appservice file.
func (s *Server) configure(raw []byte) ([]byte, error) {
	var cfg map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		return nil, fmt.Errorf("parse generated config: %w", err)
	}
	global := sub(cfg, "global")
	global["disable_federation"] = true
	global["private_key"] = filepath.Join(s.Dir, "matrix_key.pem")
	sub(global, "jetstream")["in_memory"] = false
	client := sub(cfg, "client_api")
	client["registration_disabled"] = true
	client["enable_registration_captcha"] = false
	client["registration_requires_token"] = false
	client["open_registration_without_verification_enabled"] = false
	client["registration_shared_secret"] = s.sharedSecret
	sub(client, "rate_limiting")["enabled"] = false
	cfg["logging"] = []any{map[string]any{"type": "std", "level": "warn"}}
	if as := s.appService; as != nil {
		url := as.URL
		if url == "" {
			url = "http://127.0.0.1:9" // discard port: nothing listens
		}
		reg := map[string]any{
			"id":               as.ID,
			"url":              url,
			"as_token":         as.ASToken,
			"hs_token":         as.HSToken,
			"sender_localpart": as.SenderLocalpart,
			"rate_limited":     false,
			"namespaces": map[string]any{
				"users":   []any{map[string]any{"exclusive": true, "regex": "@" + as.UserPrefix + ".*:" + ServerName}},
				"aliases": []any{},
				"rooms":   []any{},
			},
		}
		b, err := yaml.Marshal(reg)
		if err != nil {
			return nil, fmt.Errorf("appservice registration: %w", err)
		}
		p := filepath.Join(s.Dir, "appservice.yaml")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			return nil, fmt.Errorf("write appservice registration: %w", err)
		}
		sub(cfg, "app_service_api")["config_files"] = []any{p}
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("marshal config: %w", err)
	}
	return out, nil
}

func sub(m map[string]any, key string) map[string]any {
	v, ok := m[key].(map[string]any)
	if !ok {
		v = map[string]any{}
		m[key] = v
	}
	return v
}

func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	logf, err := os.OpenFile(filepath.Join(s.Dir, "dendrite.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	cmd := exec.Command(s.bin, "-config", filepath.Join(s.Dir, "dendrite.yaml"), "-http-bind-address", s.addr)
	cmd.Dir = s.Dir
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.cmd, s.done, s.log = cmd, done, logf

	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/_matrix/client/versions", nil)
		resp, err := hc.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-done:
			return fmt.Errorf("dendrite exited during start (%s)", cmd.ProcessState)
		case <-ctx.Done():
			return fmt.Errorf("no answer from %s/_matrix/client/versions within %s: %w", s.URL, startTimeout, ctx.Err())
		case <-time.After(50 * time.Millisecond): // poll interval while the server binds
		}
	}
}

// stop sends SIGTERM to the server's process group, waits up to stopTimeout, then SIGKILLs it.
func (s *Server) stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return nil
	}
	cmd, done := s.cmd, s.done
	s.cmd = nil
	defer s.log.Close()
	pgid := cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-done:
		return nil
	case <-time.After(stopTimeout):
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	select {
	case <-done:
		return fmt.Errorf("dendrite ignored SIGTERM for %s (killed)", stopTimeout)
	case <-time.After(stopTimeout):
		return errors.New("dendrite survived SIGKILL")
	}
}

// Restart stops the server and starts it again with the same directory (databases kept) and address.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	if err := s.stop(); err != nil {
		tb.Fatalf("dendrite: restart: %v", err)
	}
	if err := s.start(); err != nil {
		tb.Fatalf("dendrite: restart: %v", err)
	}
}

func (s *Server) dumpLog(tb testing.TB) {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(s.Dir, "dendrite.log"))
	if err != nil {
		return
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	tb.Logf("dendrite log (tail):\n%s", strings.Join(lines, "\n"))
}

// Register creates the account localpart by shared-secret registration (the Synapse admin API Dendrite serves)
// and returns it logged in. No user_type is sent: Dendrite leaves it out of the MAC.
func (s *Server) Register(tb testing.TB, localpart string, admin bool) User {
	tb.Helper()
	u, err := s.register(localpart, admin)
	if err != nil {
		tb.Fatalf("dendrite: register %s: %v", localpart, err)
	}
	return u
}

func (s *Server) register(localpart string, admin bool) (User, error) {
	const path = "/_synapse/admin/v1/register"
	var nonce struct {
		Nonce string `json:"nonce"`
	}
	if err := s.do(http.MethodGet, path, nil, &nonce); err != nil {
		return User{}, fmt.Errorf("nonce: %w", err)
	}
	password := randomHex(12)
	adminStr := "notadmin"
	if admin {
		adminStr = "admin"
	}
	mac := hmac.New(sha1.New, []byte(s.sharedSecret))
	mac.Write([]byte(strings.Join([]string{nonce.Nonce, localpart, password, adminStr}, "\x00")))
	req := map[string]any{
		"nonce":    nonce.Nonce,
		"username": localpart,
		"password": password,
		"admin":    admin,
		"mac":      hex.EncodeToString(mac.Sum(nil)),
	}
	var resp struct {
		UserID      string `json:"user_id"`
		AccessToken string `json:"access_token"`
		DeviceID    string `json:"device_id"`
	}
	if err := s.do(http.MethodPost, path, req, &resp); err != nil {
		return User{}, err
	}
	if resp.AccessToken == "" {
		return User{}, errors.New("no access token in the registration response")
	}
	return User{UserID: resp.UserID, AccessToken: resp.AccessToken, DeviceID: resp.DeviceID, Password: password}, nil
}

func (s *Server) do(method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.URL+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: HTTP %d: %s", method, path, resp.StatusCode, b)
	}
	return json.Unmarshal(b, out)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
