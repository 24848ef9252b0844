package command

import (
	"context"
	"errors"
	"testing"
)

// mapOnce is a Once over a map standing for the durable store (it outlives a Commands: a restart).
type mapOnce struct {
	claimed map[string]bool
	err     error
}

func (m *mapOnce) Claim(_ context.Context, key string) (bool, error) {
	if m.err != nil {
		return false, m.err
	}
	if m.claimed[key] {
		return false, nil
	}
	m.claimed[key] = true
	return true, nil
}

// TestCommandEventRunsOnce (issue 27.7): a command event handed again - in the same process, or to the next one
// after a crash before its reply was shown - runs once: the claim comes before the effect; a claim that cannot be
// recorded runs nothing; commands without an event id (Discord interactions) are not claimed.
func TestCommandEventRunsOnce(t *testing.T) {
	ctx := context.Background()
	once := &mapOnce{claimed: map[string]bool{}}
	w := newWorld()
	w.jobs.operators["u1"] = true
	start := func() *Commands { // one process over the shared durable claims
		c := w.commands()
		c.d.Once = once
		return c
	}
	spawn := Invocation{Platform: matrixWords, Conversation: channel, UserID: "u1", EventID: "$ev1", Name: "spawn", Options: map[string]any{"task": "x"}}
	add := Invocation{Platform: matrixWords, Conversation: channel, UserID: "u1", EventID: "$ev2", Name: "cron", Sub: "add",
		Options: map[string]any{"schedule": "every 10m", "prompt": "ping"}}
	tests := []struct {
		name      string
		c         *Commands
		v         Invocation
		wantErr   error
		spawns    int
		jobsAdded int
	}{
		{"first spawn", start(), spawn, nil, 1, 0},
		{"spawn handed again", start(), spawn, ErrAlreadyRun, 1, 0},
		{"first cron add", start(), add, nil, 1, 1},
		{"cron add after a restart", start(), add, ErrAlreadyRun, 1, 1},
		{"no event id: not claimed", start(), Invocation{Platform: matrixWords, Conversation: channel, UserID: "u1", Name: "spawn", Options: map[string]any{"task": "y"}}, nil, 2, 1},
	}
	for _, tc := range tests {
		_, err := tc.c.Run(ctx, tc.v)
		if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
			t.Fatalf("%s: err %v, want %v", tc.name, err, tc.wantErr)
		}
		if len(w.sessions.spawned) != tc.spawns || len(w.jobs.added) != tc.jobsAdded {
			t.Fatalf("%s: %d spawns, %d jobs added; want %d, %d", tc.name, len(w.sessions.spawned), len(w.jobs.added), tc.spawns, tc.jobsAdded)
		}
	}
	once.err = errors.New("store down")
	if _, err := start().Run(ctx, Invocation{Platform: matrixWords, Conversation: channel, UserID: "u1", EventID: "$ev3", Name: "spawn", Options: map[string]any{"task": "z"}}); err == nil || len(w.sessions.spawned) != 2 {
		t.Fatalf("a claim that failed: err %v, %d spawns; want an error and no spawn", err, len(w.sessions.spawned))
	}
}
