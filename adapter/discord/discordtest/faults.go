package discordtest

import (
	"bytes"
	"net/http"
	"strings"
	"time"
)

// FaultMode says what an injected fault does.
type FaultMode int

const (
	// FaultReject answers Status/Code without running the handler (nothing is committed).
	// With Status 0 the fault only adds Latency.
	FaultReject FaultMode = iota
	// FaultDropAfterCommit runs the handler (the write is committed and echoed on the gateway),
	// then closes the TCP connection without a response: an ambiguous create.
	FaultDropAfterCommit
	// Fault500AfterCommit commits the write, then answers Status (default 500) instead of the result.
	Fault500AfterCommit
)

// Fault is an injected REST failure.
type Fault struct {
	Method string // "" matches any method
	// Path is matched against the request path without /api/v9; a segment "*" or "{name}" matches
	// any one segment, e.g. "/channels/*/messages" or "/webhooks/{webhook_id}/{webhook_token}".
	Path       string
	Times      int // calls affected: 0 means 1, negative means every call until ClearFaults
	Status     int
	Code       int
	Message    string
	RetryAfter time.Duration // for Status 429; default 100 ms
	Latency    time.Duration // delay before handling
	Mode       FaultMode
	// After lets that many matching calls through before the fault applies
	// (e.g. After 1 on a message create fails the second part of a split reply).
	After int
	// BodyContains, when set, restricts the fault to requests whose body
	// contains it (one payload among concurrent sends).
	BodyContains string
}

func (f *Fault) message() string {
	if f.Message != "" {
		return f.Message
	}
	return http.StatusText(f.Status)
}

type faultState struct {
	Fault
	left int
	skip int // matching calls still let through (Fault.After)
	segs []string
}

// InjectFault queues a fault; faults are consulted in the order injected.
func (e *Emulator) InjectFault(f Fault) {
	left := f.Times
	if left == 0 {
		left = 1
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.faults = append(e.faults, &faultState{Fault: f, left: left, skip: f.After, segs: splitPath(f.Path)})
}

// ClearFaults removes every pending fault.
func (e *Emulator) ClearFaults() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.faults = nil
}

func (e *Emulator) takeFault(method string, segs []string, body []byte) *Fault {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, f := range e.faults {
		if f.Method != "" && f.Method != method || !segsMatch(f.segs, segs) || f.BodyContains != "" && !bytes.Contains(body, []byte(f.BodyContains)) {
			continue
		}
		if f.skip > 0 {
			f.skip--
			return nil
		}
		out := f.Fault
		if f.left > 0 {
			f.left--
			if f.left == 0 {
				e.faults = append(e.faults[:i:i], e.faults[i+1:]...)
			}
		}
		return &out
	}
	return nil
}

func segsMatch(pat, segs []string) bool {
	if len(pat) != len(segs) {
		return false
	}
	for i, p := range pat {
		if p == "*" || strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}") {
			continue
		}
		if p != segs[i] {
			return false
		}
	}
	return true
}
