package memory

import (
	"context"
	"sort"
	"sync"

	"github.com/agentbot/agentbot/internal/procs"
)

var _ procs.Store = (*Processes)(nil)

// Processes is an in-memory record of running child process groups
// (tests and the demo).
type Processes struct {
	mu sync.Mutex
	m  map[string]procs.Record
}

// NewProcesses returns an empty record.
func NewProcesses() *Processes { return &Processes{m: map[string]procs.Record{}} }

// RecordProcess inserts or replaces a record by key.
func (p *Processes) RecordProcess(ctx context.Context, r procs.Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.m[r.Key()] = r
	return nil
}

// RemoveProcess forgets a record.
func (p *Processes) RemoveProcess(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.m, key)
	return nil
}

// Processes lists every record by key.
func (p *Processes) Processes(ctx context.Context) ([]procs.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]procs.Record, 0, len(p.m))
	for _, r := range p.m {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out, nil
}
