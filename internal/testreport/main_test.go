package main

import (
	"strings"
	"testing"
)

// TestRun: passes are counted, a failure prints its output and fails the
// run, a skip is listed with its reason, a test still running when its
// package fails (a timeout) is printed as unfinished.
func TestRun(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		wantCode int
		want     []string
	}{
		{"all pass", `{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"pass","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Output":"ok  \tp\t0.1s\n"}
{"Action":"pass","Package":"p"}`, 0, []string{"ok  \tp\t0.1s", "1 passed, 0 failed, 0 skipped"}},
		{"skip with reason", `{"Action":"output","Package":"p","Test":"TestB","Output":"    b_test.go:9: dendrite: not built (make dendrite)\n"}
{"Action":"output","Package":"p","Test":"TestB","Output":"--- SKIP: TestB (0.00s)\n"}
{"Action":"skip","Package":"p","Test":"TestB"}
{"Action":"pass","Package":"p"}`, 0, []string{"p TestB: dendrite: not built (make dendrite)", "0 passed, 0 failed, 1 skipped", "make deps"}},
		{"failure", `{"Action":"output","Package":"p","Test":"TestC","Output":"    c_test.go:3: boom\n"}
{"Action":"fail","Package":"p","Test":"TestC"}
{"Action":"output","Package":"p","Output":"FAIL\tp\t0.2s\n"}
{"Action":"fail","Package":"p"}`, 1, []string{"=== FAIL p TestC", "boom", "FAIL\tp\t0.2s", "0 passed, 1 failed, 0 skipped"}},
		{"timeout", `{"Action":"output","Package":"p","Test":"TestD","Output":"=== RUN   TestD\n"}
{"Action":"output","Package":"p","Output":"panic: test timed out after 1s\n"}
{"Action":"fail","Package":"p"}`, 1, []string{"=== UNFINISHED p TestD", "panic: test timed out"}},
		{"build failure", `{"ImportPath":"q","Action":"build-output","Output":"q/x.go:1:1: syntax error\n"}
{"Action":"fail","Package":"q"}`, 1, []string{"syntax error"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			if code := run(strings.NewReader(tt.in), &out); code != tt.wantCode {
				t.Errorf("exit %d, want %d\n%s", code, tt.wantCode, out.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}
