package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/agentbot/agentbot/store/bolt"
)

// cmdBackup writes a consistent copy of the bbolt store to FILE and
// verifies it. A stopped bot's file is copied directly; a running bot holds
// bbolt's exclusive lock (a read-only open would wait for it), so the copy
// is asked of the bot itself: GET /backup on http.listen, which needs
// http.token (docs/DECISIONS.md).
func cmdBackup(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("backup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var file string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		file, args = args[0], args[1:]
	}
	cfg, code := loadConfig(fs, args, stderr)
	if cfg == nil {
		return code
	}
	if file == "" && fs.NArg() == 1 {
		file = fs.Arg(0)
	}
	if file == "" || fs.NArg() > 1 {
		fmt.Fprintln(stderr, "usage: bot backup FILE [-config FILE]")
		return exitUsage
	}
	if cfg.Store.Driver == "postgres" {
		fmt.Fprintln(stderr, "bot backup: the store is PostgreSQL: back it up with pg_dump (bot backup copies the bbolt file)")
		return exitUsage
	}
	st, err := bolt.Open(cfg.Store.Path, bolt.Options{LockTimeout: 200 * time.Millisecond})
	var n int64
	how := "from the file"
	switch {
	case errors.Is(err, bolt.ErrLocked):
		if !cfg.HTTP.Enabled() || cfg.HTTP.Token == "" {
			fmt.Fprintln(stderr, "bot backup: the store is locked by a running bot, which serves backups only on http.listen with http.token set; set both (e.g. token: ${BOT_HTTP_TOKEN}) and restart it, or stop the bot")
			return exitUsage
		}
		how = "from the running bot"
		n, err = backupRemote(ctx, cfg.HTTP.Listen, cfg.HTTP.Token, file)
	case err != nil:
		fmt.Fprintln(stderr, "bot backup:", err)
		return exitUsage
	default:
		pr, pw := io.Pipe()
		go func() { _, werr := st.WriteTo(pw); pw.CloseWithError(werr) }()
		n, err = bolt.WriteFile(file, pr)
		pr.CloseWithError(err) // unblocks the writer if WriteFile stopped early
		st.Close()
	}
	if err != nil {
		fmt.Fprintln(stderr, "bot backup:", err)
		return exitProblems
	}
	schema, err := bolt.Verify(file)
	if err != nil {
		fmt.Fprintln(stderr, "bot backup: the copy does not check out:", err)
		return exitProblems
	}
	fmt.Fprintf(stdout, "✔ backup %s: %d bytes %s, schema %d, every page checked\n", file, n, how, schema)
	fmt.Fprintf(stdout, "  restore: stop the bot, then copy it over %s (mode 0600)\n", cfg.Store.Path)
	return exitOK
}

// backupRemote downloads the running bot's backup to file (atomically).
func backupRemote(ctx context.Context, listen, token, file string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+listen+"/backup", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("the store is locked by a running bot, and its HTTP endpoint did not answer: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return 0, fmt.Errorf("the running bot refused the backup: %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	n, err := bolt.WriteFile(file, resp.Body)
	if err == nil && resp.ContentLength >= 0 && n != resp.ContentLength {
		err = fmt.Errorf("backup %s: got %d of %d bytes", file, n, resp.ContentLength)
	}
	return n, err
}
