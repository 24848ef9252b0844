// Command testreport reads `go test -json` events on stdin and prints what a
// person reading `make test` needs: each package's result line as go test
// prints it, the whole output of every failed test, and at the end every
// skipped test with its reason, the one command that enables the skipped
// suites, and a closing "N passed, N failed, N skipped" line. It exits 1 when
// a test or a package failed (a build failure included), else 0.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// event is one test2json record.
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

type key struct{ pkg, test string }

func main() {
	os.Exit(run(os.Stdin, os.Stdout))
}

func run(in io.Reader, out io.Writer) int {
	output := map[key][]string{}
	var skipped []string
	passed, failed := 0, 0
	pkgFailed := false
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			fmt.Fprintln(out, string(line)) // build errors and other plain lines
			continue
		}
		k := key{e.Package, e.Test}
		switch e.Action {
		case "build-output":
			fmt.Fprint(out, e.Output)
		case "output":
			if e.Test == "" && isSummary(e.Output) {
				fmt.Fprint(out, e.Output)
				continue
			}
			output[k] = append(output[k], e.Output)
		case "pass":
			if e.Test != "" {
				passed++
			}
			delete(output, k)
		case "skip":
			if e.Test != "" {
				skipped = append(skipped, fmt.Sprintf("%s %s: %s", e.Package, e.Test, skipReason(output[k])))
			}
			delete(output, k)
		case "fail":
			if e.Test != "" {
				failed++
				fmt.Fprintf(out, "=== FAIL %s %s\n%s", e.Package, e.Test, strings.Join(output[k], ""))
				delete(output, k)
				continue
			}
			// The package failed: its own output (a panic, a timeout's
			// goroutine dump) and the output of tests that never ended.
			pkgFailed = true
			for ok, lines := range output {
				if ok.pkg == e.Package && ok.test != "" {
					fmt.Fprintf(out, "=== UNFINISHED %s %s\n%s", ok.pkg, ok.test, strings.Join(lines, ""))
					delete(output, ok)
				}
			}
			fmt.Fprint(out, strings.Join(output[k], ""))
			delete(output, k)
		}
	}
	if len(skipped) > 0 {
		slices.Sort(skipped)
		fmt.Fprintf(out, "\nskipped %d tests:\n", len(skipped))
		for _, s := range skipped {
			fmt.Fprintln(out, "  "+s)
		}
		if slices.ContainsFunc(skipped, installable) {
			fmt.Fprintln(out, "to run the skipped suites: `make deps` (npm programs and Dendrite, no root) and, as root,")
			fmt.Fprintln(out, "`apt-get install -y chromium postgresql nodejs npm gcc bubblewrap`; then `make test` again")
		}
	}
	fmt.Fprintf(out, "\n%d passed, %d failed, %d skipped\n", passed, failed, len(skipped))
	if failed > 0 || pkgFailed {
		return 1
	}
	return 0
}

// installable reports whether a skip names a program the set-up commands
// install.
func installable(skip string) bool {
	s := strings.ToLower(skip)
	for _, w := range []string{"npm", "dendrite", "chromium", "postgres", "bwrap", "bubblewrap", "not installed"} {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// isSummary reports whether a package-level line is go test's result
// line for the package ("ok", "FAIL", "?").
func isSummary(line string) bool {
	return strings.HasPrefix(line, "ok ") || strings.HasPrefix(line, "FAIL\t") || strings.HasPrefix(line, "?")
}

// skipReason is the skip message: the last output line that is not a
// "=== RUN" or "--- SKIP" line, without its "file_test.go:12: " prefix.
func skipReason(lines []string) string {
	reason := "skipped"
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "--- ") || strings.HasPrefix(t, "=== ") {
			continue
		}
		if pos, msg, ok := strings.Cut(t, ": "); ok && strings.Contains(pos, ".go:") {
			t = msg
		}
		reason = t
	}
	return reason
}
