package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// cmdHealthcheck asks the running bot's /healthz on http.listen (the
// container image's HEALTHCHECK: its base has no curl). Exit 0 healthy.
func cmdHealthcheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg, code := loadConfig(fs, args, stderr)
	if cfg == nil {
		return code
	}
	if !cfg.HTTP.Enabled() {
		fmt.Fprintln(stderr, "bot healthcheck: http.listen is empty: nothing to ask")
		return exitUsage
	}
	host, port, err := net.SplitHostPort(cfg.HTTP.Listen)
	if err != nil {
		fmt.Fprintln(stderr, "bot healthcheck: http.listen:", err)
		return exitUsage
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	ctx, cancel := context.WithTimeout(ctx, 4*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(host, port)+"/healthz", nil)
	if err != nil {
		fmt.Fprintln(stderr, "bot healthcheck:", err)
		return exitProblems
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintln(stderr, "bot healthcheck:", err)
		return exitProblems
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintln(stderr, "bot healthcheck: /healthz answered", resp.Status)
		return exitProblems
	}
	fmt.Fprintln(stdout, "ok")
	return exitOK
}
