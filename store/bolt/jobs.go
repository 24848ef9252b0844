package bolt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.etcd.io/bbolt"

	"github.com/agentbot/agentbot/scheduler"
)

// Scheduler records: jobs in bucketJobs (id -> JSON); runs in bucketJobRuns,
// one nested bucket per job (run id -> JSON), pruned to the retention on
// every PutRun (retention is small, so ordering is done in memory); the
// instant ledger in bucketJobLedger (job id -> timeKey of the newest
// claimed instant), claimed inside one read-write transaction.

var _ scheduler.Store = (*Store)(nil)

var jobs = jsonBucket[scheduler.Job]{name: bucketJobs}

// PutJob inserts or replaces a job by ID.
func (s *Store) PutJob(ctx context.Context, j scheduler.Job) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if strings.TrimSpace(j.ID) == "" {
		return errors.New("bolt: job with empty id")
	}
	return s.db.Update(func(tx *bbolt.Tx) error { return jobs.put(tx, j.ID, j) })
}

// DeleteJob removes a job with its runs and ledger record.
func (s *Store) DeleteJob(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if id == "" {
		return nil
	}
	return s.db.Update(func(tx *bbolt.Tx) error {
		if err := jobs.delete(tx, id); err != nil {
			return err
		}
		runs, err := bucketOf(tx, bucketJobRuns)
		if err != nil {
			return err
		}
		if runs.Bucket([]byte(id)) != nil {
			if err := runs.DeleteBucket([]byte(id)); err != nil {
				return err
			}
		}
		ledger, err := bucketOf(tx, bucketJobLedger)
		if err != nil {
			return err
		}
		return ledger.Delete([]byte(id))
	})
}

// Job returns one job.
func (s *Store) Job(ctx context.Context, id string) (scheduler.Job, bool, error) {
	if err := ctx.Err(); err != nil {
		return scheduler.Job{}, false, err
	}
	var (
		j  scheduler.Job
		ok bool
	)
	if id == "" {
		return j, false, nil
	}
	err := s.db.View(func(tx *bbolt.Tx) error {
		var err error
		j, ok, err = jobs.get(tx, id)
		return err
	})
	return j, ok, err
}

// Jobs returns every job ordered by ID.
func (s *Store) Jobs(ctx context.Context) ([]scheduler.Job, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []scheduler.Job
	err := s.db.View(func(tx *bbolt.Tx) error {
		var err error
		out, err = jobs.all(tx)
		return err
	})
	return out, err
}

func bucketOf(tx *bbolt.Tx, name []byte) (*bbolt.Bucket, error) {
	b := tx.Bucket(name)
	if b == nil {
		return nil, fmt.Errorf("bolt: bucket %q missing (schema not migrated?)", name)
	}
	return b, nil
}

func newestRunFirst(a, b scheduler.Run) int {
	if c := b.StartedAt.Compare(a.StartedAt); c != 0 {
		return c
	}
	return strings.Compare(b.RunID, a.RunID)
}

func decodeRuns(b *bbolt.Bucket) ([]scheduler.Run, error) {
	var out []scheduler.Run
	err := b.ForEach(func(k, raw []byte) error {
		var r scheduler.Run
		if err := json.Unmarshal(raw, &r); err != nil {
			return fmt.Errorf("bolt: decode run %q: %w", k, err)
		}
		out = append(out, r)
		return nil
	})
	slices.SortFunc(out, newestRunFirst)
	return out, err
}

// PutRun inserts or replaces a run and keeps the newest keep runs of its job.
func (s *Store) PutRun(ctx context.Context, r scheduler.Run, keep int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if strings.TrimSpace(r.JobID) == "" || strings.TrimSpace(r.RunID) == "" {
		return errors.New("bolt: run with empty job or run id")
	}
	raw, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("bolt: encode run %s/%s: %w", r.JobID, r.RunID, err)
	}
	return s.db.Update(func(tx *bbolt.Tx) error {
		all, err := bucketOf(tx, bucketJobRuns)
		if err != nil {
			return err
		}
		b, err := all.CreateBucketIfNotExists([]byte(r.JobID))
		if err != nil {
			return err
		}
		if err := b.Put([]byte(r.RunID), raw); err != nil {
			return err
		}
		if keep <= 0 {
			return nil
		}
		n := 0
		c := b.Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			n++
		}
		if n <= keep {
			return nil
		}
		runs, err := decodeRuns(b)
		if err != nil {
			return err
		}
		for _, old := range runs[min(keep, len(runs)):] {
			if err := b.Delete([]byte(old.RunID)); err != nil {
				return err
			}
		}
		return nil
	})
}

// Runs returns up to limit runs of a job, newest first.
func (s *Store) Runs(ctx context.Context, jobID string, limit int) ([]scheduler.Run, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := []scheduler.Run{}
	err := s.db.View(func(tx *bbolt.Tx) error {
		all, err := bucketOf(tx, bucketJobRuns)
		if err != nil {
			return err
		}
		b := all.Bucket([]byte(jobID))
		if b == nil || jobID == "" {
			return nil
		}
		runs, err := decodeRuns(b)
		if err != nil {
			return err
		}
		if limit > 0 && len(runs) > limit {
			runs = runs[:limit]
		}
		out = append(out, runs...)
		return nil
	})
	return out, err
}

// ClaimInstant claims a job's scheduled instant once: it succeeds only when
// the instant is after the newest one claimed for the job.
func (s *Store) ClaimInstant(ctx context.Context, jobID string, instant time.Time) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if jobID == "" {
		return false, errors.New("bolt: claim with empty job id")
	}
	claimed := false
	err := s.db.Update(func(tx *bbolt.Tx) error {
		ledger, err := bucketOf(tx, bucketJobLedger)
		if err != nil {
			return err
		}
		k := timeKey(instant, "")
		if last := ledger.Get([]byte(jobID)); last != nil && string(k) <= string(last) {
			return nil
		}
		claimed = true
		return ledger.Put([]byte(jobID), k)
	})
	return claimed && err == nil, err
}
