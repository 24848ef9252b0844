package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/store/bolt"
)

// TestReindexAndDoctor: bot doctor reports the recall index (not built,
// then its size and lag); bot reindex builds it from the transcripts; with
// memory off, reindex says there is no index.
func TestReindexAndDoctor(t *testing.T) {
	dir := t.TempDir()
	storePath := filepath.Join(dir, "bot.db")
	st, err := bolt.Open(storePath, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	svc := transcript.New(transcript.Options{}, transcript.Deps{Store: st})
	for i := range 3 {
		if _, err := svc.Append(context.Background(), "agent:main:discord:channel:c1", transcript.Entry{Role: transcript.RoleUser, Text: fmt.Sprintf("entry %d", i), MessageIDs: []string{fmt.Sprint(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	write := func(enabled bool) string {
		p := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(p, []byte(fmt.Sprintf("store: {path: %q}\nhttp: {listen: \"\"}\nmemory: {enabled: %v}\n", storePath, enabled)), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	on, off := write(true), write(false)
	if _, out, _ := cliRun(t, "doctor", "-config", on); !strings.Contains(out, "recall index not built yet") {
		t.Fatalf("doctor before the build:\n%s", out)
	}
	if code, out, errOut := cliRun(t, "reindex", "-config", on); code != 0 || !strings.Contains(out, "reindexed 3 entries") {
		t.Fatalf("bot reindex = %d %q %q", code, out, errOut)
	}
	if _, out, _ := cliRun(t, "doctor", "-config", on); !strings.Contains(out, "✔ recall index: 3 documents") || !strings.Contains(out, "lag: none") {
		t.Fatalf("doctor after the build:\n%s", out)
	}
	if code, _, errOut := cliRun(t, "reindex", "-config", off); code != exitUsage || !strings.Contains(errOut, "memory.enabled is false") {
		t.Fatalf("reindex with memory off = %d %q", code, errOut)
	}
}
