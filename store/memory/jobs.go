package memory

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/agentbot/agentbot/scheduler"
)

var _ scheduler.Store = (*Store)(nil)

// schedState holds the scheduler's records; guarded by Store.mu, maps made lazily.
type schedState struct {
	jobs   map[string]scheduler.Job
	runs   map[string]map[string]scheduler.Run // job -> run id -> run
	ledger map[string]time.Time                // job -> newest claimed instant
}

// deepCopy copies through JSON, as a persistent store would.
func deepCopy[T any](v T) T {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var out T
	if err := json.Unmarshal(raw, &out); err != nil {
		panic(err)
	}
	return out
}

// PutJob inserts or replaces a job by ID.
func (s *Store) PutJob(ctx context.Context, j scheduler.Job) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	if strings.TrimSpace(j.ID) == "" {
		return errors.New("memory: job with empty id")
	}
	c := deepCopy(j)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sched.jobs == nil {
		s.sched.jobs = map[string]scheduler.Job{}
	}
	s.sched.jobs[j.ID] = c
	return nil
}

// DeleteJob removes a job, its runs and its ledger.
func (s *Store) DeleteJob(ctx context.Context, id string) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sched.jobs, id)
	delete(s.sched.runs, id)
	delete(s.sched.ledger, id)
	return nil
}

// Job returns one job.
func (s *Store) Job(ctx context.Context, id string) (scheduler.Job, bool, error) {
	if err := ctxErr(ctx); err != nil {
		return scheduler.Job{}, false, err
	}
	s.mu.RLock()
	j, ok := s.sched.jobs[id]
	s.mu.RUnlock()
	if !ok {
		return scheduler.Job{}, false, nil
	}
	return deepCopy(j), true, nil
}

// Jobs returns every job ordered by ID.
func (s *Store) Jobs(ctx context.Context) ([]scheduler.Job, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	s.mu.RLock()
	out := make([]scheduler.Job, 0, len(s.sched.jobs))
	for _, j := range s.sched.jobs {
		out = append(out, j)
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b scheduler.Job) int { return strings.Compare(a.ID, b.ID) })
	return deepCopy(out), nil
}

func newestFirst(a, b scheduler.Run) int {
	if c := b.StartedAt.Compare(a.StartedAt); c != 0 {
		return c
	}
	return strings.Compare(b.RunID, a.RunID)
}

// PutRun inserts or replaces a run and prunes the job's runs to keep.
func (s *Store) PutRun(ctx context.Context, r scheduler.Run, keep int) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	if strings.TrimSpace(r.JobID) == "" || strings.TrimSpace(r.RunID) == "" {
		return errors.New("memory: run with empty job or run id")
	}
	c := deepCopy(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sched.runs == nil {
		s.sched.runs = map[string]map[string]scheduler.Run{}
	}
	m := s.sched.runs[r.JobID]
	if m == nil {
		m = map[string]scheduler.Run{}
		s.sched.runs[r.JobID] = m
	}
	m[r.RunID] = c
	if keep > 0 && len(m) > keep {
		all := make([]scheduler.Run, 0, len(m))
		for _, v := range m {
			all = append(all, v)
		}
		slices.SortFunc(all, newestFirst)
		for _, old := range all[keep:] {
			delete(m, old.RunID)
		}
	}
	return nil
}

// Runs returns up to limit runs of a job, newest first.
func (s *Store) Runs(ctx context.Context, jobID string, limit int) ([]scheduler.Run, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	s.mu.RLock()
	out := make([]scheduler.Run, 0, len(s.sched.runs[jobID]))
	for _, r := range s.sched.runs[jobID] {
		out = append(out, r)
	}
	s.mu.RUnlock()
	slices.SortFunc(out, newestFirst)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return deepCopy(out), nil
}

// ClaimInstant claims a job's instant once (a high-water mark per job).
func (s *Store) ClaimInstant(ctx context.Context, jobID string, instant time.Time) (bool, error) {
	if err := ctxErr(ctx); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sched.ledger == nil {
		s.sched.ledger = map[string]time.Time{}
	}
	if last, ok := s.sched.ledger[jobID]; ok && !instant.After(last) {
		return false, nil
	}
	s.sched.ledger[jobID] = instant
	return true, nil
}
