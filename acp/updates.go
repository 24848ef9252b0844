package acp

import (
	"bytes"
	"encoding/json"
	"io"
	"sync"
	"time"
)

// updates counts the session/update notifications an agent wrote, as the
// connection reads them, and those the bot has handled. The SDK hands
// notifications to their handler on a queue of its own, after the reader:
// when the agent dies right after an update, the prompt fails (the
// connection is gone) before that update is handled, and a turn ended then
// would drop it. A turn whose agent died waits (bounded) until every update
// read has been handled.
type updates struct {
	r io.Reader

	mu      sync.Mutex
	changed chan struct{} // closed and replaced at every change
	line    []byte        // the incomplete last line read
	read    int
	handled int
}

func newUpdates(r io.Reader) *updates { return &updates{r: r, changed: make(chan struct{})} }

// Read reads from the agent and counts the update lines it completes.
func (u *updates) Read(p []byte) (int, error) {
	n, err := u.r.Read(p)
	u.mu.Lock()
	defer u.mu.Unlock()
	data := p[:n]
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			u.line = append(u.line, data...)
			break
		}
		if isUpdate(append(u.line, data[:i]...)) {
			u.read++
			u.changedLocked()
		}
		u.line, data = u.line[:0], data[i+1:]
	}
	return n, err
}

// done records one handled update.
func (u *updates) done() {
	u.mu.Lock()
	u.handled++
	u.changedLocked()
	u.mu.Unlock()
}

func (u *updates) changedLocked() {
	close(u.changed)
	u.changed = make(chan struct{})
}

// drained returns once every update read so far is handled, or after wait.
func (u *updates) drained(after func(time.Duration) <-chan time.Time, wait time.Duration) {
	timeout := after(wait)
	for {
		u.mu.Lock()
		ok, ch := u.handled >= u.read, u.changed
		u.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			return
		}
	}
}

// isUpdate reports whether a JSON-RPC line is a session/update notification.
func isUpdate(line []byte) bool {
	if !bytes.Contains(line, []byte("session/update")) {
		return false
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	return json.Unmarshal(line, &m) == nil && m.Method == "session/update" && m.ID == nil
}
