package session

import (
	"context"
	"sync"
)

// serial runs tasks one at a time per key, in the order they were pushed:
// a key's first task starts a goroutine that runs its tasks until none
// is left, then ends (an idle session costs nothing). run executes one
// task (panics are its business).
type serial struct {
	run func(key string, task func(context.Context))

	mu    sync.Mutex
	byKey map[string][]func(context.Context) // pending tasks of a key with a running goroutine
}

func newSerial(run func(key string, task func(context.Context))) *serial {
	return &serial{run: run, byKey: map[string][]func(context.Context){}}
}

// push queues task behind key's earlier tasks.
func (s *serial) push(key string, task func(context.Context)) {
	s.mu.Lock()
	pending, running := s.byKey[key]
	s.byKey[key] = append(pending, task)
	s.mu.Unlock()
	if !running {
		go s.drain(key)
	}
}

func (s *serial) drain(key string) {
	for {
		s.mu.Lock()
		pending := s.byKey[key]
		if len(pending) == 0 {
			delete(s.byKey, key)
			s.mu.Unlock()
			return
		}
		task := pending[0]
		s.byKey[key] = pending[1:]
		s.mu.Unlock()
		s.run(key, task)
	}
}
