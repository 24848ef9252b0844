package acp

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// The counter finds update notifications however the reads split the
// lines, and not requests, responses or other notifications; drained
// returns once each is handled.
func TestUpdatesCountedAcrossReads(t *testing.T) {
	in := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk"}}}
{"jsonrpc":"2.0","id":3,"method":"session/request_permission","params":{"note":"session/update"}}
{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}
{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s"}}
`
	u := newUpdates(iotest.OneByteReader(strings.NewReader(in)))
	if _, err := io.ReadAll(u); err != nil {
		t.Fatal(err)
	}
	if u.read != 2 {
		t.Fatalf("counted %d updates, want 2", u.read)
	}
	never := func(time.Duration) <-chan time.Time { return nil }
	done := make(chan struct{})
	go func() { u.drained(never, time.Second); close(done) }()
	u.done()
	select {
	case <-done:
		t.Fatal("drained with one of two updates handled")
	case <-time.After(10 * time.Millisecond):
	}
	u.done()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("not drained with both updates handled")
	}
}
