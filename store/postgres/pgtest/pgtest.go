// Package pgtest gives tests a fresh PostgreSQL database each.
//
// With $AGENTBOT_TEST_DSN set, databases are created on that server (its
// user needs CREATEDB) and dropped when the test ends. Otherwise the first
// DSN call starts a private server: initdb into a temporary directory, then
// postgres listening on 127.0.0.1 at a free port with its unix socket in
// the same directory, durability switched off (fsync, synchronous_commit,
// full_page_writes) because the data is thrown away. As root, initdb and
// postgres run as the "postgres" OS user (they refuse to run as root). The
// server dies with the test binary (parent-death signal) and Main stops it
// and removes its directory after the package's tests:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
// (or t.Cleanup(pgtest.Stop) where the package has no TestMain of its own)
//
// When no server can be had, tests skip with the reason, except under
// CI=true, where they fail: CI must run the PostgreSQL suites.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// EnvDSN names the variable holding an existing server's DSN.
const EnvDSN = "AGENTBOT_TEST_DSN"

var (
	mu      sync.Mutex
	started bool
	srv     *server
	srvErr  error
)

type server struct {
	base  string // DSN of the admin database, without a database for URL forms
	admin *pgxpool.Pool
	ext   bool // external server: drop databases after each test

	// Private server only.
	dir    string
	bin    string
	port   int
	cred   *syscall.Credential
	cmd    *exec.Cmd
	exited chan struct{} // closed when the server process has exited
}

// Main runs the package's tests and then stops the private server, if one
// was started. Use it from TestMain.
func Main(m *testing.M) int {
	code := m.Run()
	Stop()
	return code
}

// Stop stops the private server now (a later DSN starts a new one). Test
// binaries without a pgtest TestMain call it from t.Cleanup; the server
// would otherwise live until the test binary exits.
func Stop() {
	mu.Lock()
	defer mu.Unlock()
	if srv != nil {
		srv.stop()
	}
	started, srv, srvErr = false, nil, nil
}

func current() (*server, error) {
	mu.Lock()
	defer mu.Unlock()
	if !started {
		srv, srvErr = start()
		started = true
	}
	return srv, srvErr
}

// DSN creates an empty database for t and returns its DSN. It skips t (or
// fails it under CI=true) when PostgreSQL is not available.
func DSN(t testing.TB) string {
	t.Helper()
	srv, srvErr := current()
	if srvErr != nil {
		if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
			t.Fatalf("pgtest: PostgreSQL is required under CI: %v", srvErr)
		}
		t.Skipf("pgtest: PostgreSQL not available, skipping (set %s, or install postgresql): %v", EnvDSN, srvErr)
	}
	name := "t_" + randHex(6)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := srv.admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	if srv.ext {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := srv.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
				t.Logf("pgtest: drop database %s: %v", name, err)
			}
		})
	}
	dsn, err := withDatabase(srv.base, name)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return dsn
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// withDatabase returns dsn naming database name instead of its own.
func withDatabase(dsn, name string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("parse %s: %w", EnvDSN, err)
		}
		u.Path = "/" + name
		return u.String(), nil
	}
	return dsn + " dbname=" + name, nil // a later key wins
}

func start() (*server, error) {
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		admin, err := connect(dsn, 10*time.Second)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvDSN, err)
		}
		return &server{base: dsn, admin: admin, ext: true}, nil
	}
	return startPrivate()
}

func connect(dsn string, wait time.Duration) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = 2
	deadline := time.Now().Add(wait)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err == nil {
			err = pool.Ping(ctx)
			if err != nil {
				pool.Close()
			}
		}
		cancel()
		if err == nil {
			return pool, nil
		}
		if time.Now().After(deadline) {
			return nil, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// binDir finds the directory holding initdb and postgres: $PATH first, then
// Debian's /usr/lib/postgresql/<version>/bin (newest version).
func binDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(a)), 64)
		vb, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(b)), 64)
		return int(vb - va)
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("initdb/postgres not found on $PATH or in /usr/lib/postgresql/*/bin (Debian: apt-get install -y postgresql)")
}

func startPrivate() (*server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "agentbot-pg-")
	if err != nil {
		return nil, err
	}
	s := &server{dir: dir, bin: bin}
	fail := func(err error) (*server, error) {
		s.stop()
		return nil, err
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return fail(errors.New(`running as root and there is no "postgres" OS user to run initdb/postgres as (useradd --system postgres)`))
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return fail(err)
		}
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust",
		"-E", "UTF8", "--no-locale", "--no-sync")
	initdb.Dir = dir
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("initdb: %v\n%s", err, out))
	}
	if s.port, err = freePort(); err != nil {
		return fail(err)
	}
	s.base = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
	if err := s.launch(); err != nil {
		return fail(err)
	}
	return s, nil
}

// launch starts the private server's process on its data directory and
// port and waits until it accepts connections (then s.admin is set).
func (s *server) launch() error {
	logf, err := os.OpenFile(filepath.Join(s.dir, "postgres.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o666)
	if err != nil {
		return err
	}
	defer logf.Close()
	s.cmd = exec.Command(filepath.Join(s.bin, "postgres"), "-D", filepath.Join(s.dir, "data"), "-p", strconv.Itoa(s.port), "-k", s.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=200")
	s.cmd.Dir = s.dir
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	// The server dies with the test binary even when Main does not run.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGQUIT}
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	exited := make(chan struct{})
	s.exited = exited
	cmd := s.cmd
	go func() { _ = cmd.Wait(); close(exited) }()
	type result struct {
		pool *pgxpool.Pool
		err  error
	}
	ready := make(chan result, 1)
	go func() {
		p, err := connect(s.base, 30*time.Second)
		ready <- result{p, err}
	}()
	select {
	case r := <-ready:
		if r.err != nil {
			return fmt.Errorf("postgres did not accept connections: %v\n%s", r.err, tail(filepath.Join(s.dir, "postgres.log")))
		}
		s.admin = r.pool
	case <-exited:
		return fmt.Errorf("postgres exited at start:\n%s", tail(filepath.Join(s.dir, "postgres.log")))
	}
	return nil
}

// halt stops the server process (fast shutdown: sessions are terminated
// with 57P01, as in a restart or failover; kill after 10s) and keeps its
// data directory.
func (s *server) halt() {
	if s.admin != nil {
		s.admin.Close()
		s.admin = nil
	}
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
	}
	s.cmd = nil
}

// Server is a private PostgreSQL server of one test, which the test may
// stop and start again (a restart or failover of the database, at a point
// the test chooses). Its databases keep their data across a restart.
type Server struct {
	mu  sync.Mutex
	srv *server
}

// NewServer starts a private server for t (skipping t, or failing it
// under CI=true, when PostgreSQL cannot be started; an external
// $AGENTBOT_TEST_DSN server cannot be restarted by a test, so it is not
// used here). The server is stopped and removed when t ends.
func NewServer(t testing.TB) *Server {
	t.Helper()
	srv, err := startPrivate()
	if err != nil {
		if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
			t.Fatalf("pgtest: PostgreSQL is required under CI: %v", err)
		}
		t.Skipf("pgtest: PostgreSQL not available, skipping (install postgresql): %v", err)
	}
	s := &Server{srv: srv}
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.srv.stop()
	})
	return s
}

// DSN creates an empty database on the server and returns its DSN.
func (s *Server) DSN(t testing.TB) string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv.admin == nil {
		t.Fatal("pgtest: DSN while the server is stopped")
	}
	name := "t_" + randHex(6)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.srv.admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	dsn, err := withDatabase(s.srv.base, name)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return dsn
}

// Stop shuts the server down (fast shutdown: open sessions end with
// 57P01 admin_shutdown; new connections are refused) and returns once it
// has exited. The data stays for Start.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.srv.halt()
}

// Start starts a stopped server again on the same port and data and
// returns once it accepts connections.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv.cmd != nil {
		return nil
	}
	return s.srv.launch()
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// stop closes the admin pool, stops a private server (fast shutdown, then
// kill after 10s) and removes its directory.
func (s *server) stop() {
	s.halt()
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
}
