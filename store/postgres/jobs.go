package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentbot/agentbot/scheduler"
)

// Scheduler tables: jobs (id -> JSON), job_runs ((job, run) -> StartedAt
// columns + JSON, pruned to the retention on every PutRun in the same
// transaction), and job_ledger (job -> newest claimed instant).
// ClaimInstant is a single conditional upsert, so two processes claiming
// the same instant serialise on the ledger row and exactly one wins.

// PutJob inserts or replaces a job by ID.
func (s *Store) PutJob(ctx context.Context, j scheduler.Job) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if strings.TrimSpace(j.ID) == "" {
		return errors.New("postgres: job with empty id")
	}
	raw, err := encode("job", j.ID, j)
	if err != nil {
		return err
	}
	return s.do(ctx, "put job", idempotent, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, `INSERT INTO jobs (id, data) VALUES ($1, $2)
ON CONFLICT (id) DO UPDATE SET data = excluded.data`, j.ID, raw)
		return err
	})
}

// DeleteJob removes a job with its runs and ledger record.
func (s *Store) DeleteJob(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if id == "" {
		return nil
	}
	return s.inTx(ctx, "delete job", idempotent, func(tx pgx.Tx) error {
		var b pgx.Batch
		b.Queue(`DELETE FROM jobs WHERE id = $1`, id)
		b.Queue(`DELETE FROM job_runs WHERE job_id = $1`, id)
		b.Queue(`DELETE FROM job_ledger WHERE job_id = $1`, id)
		return tx.SendBatch(ctx, &b).Close()
	})
}

// Job returns one job.
func (s *Store) Job(ctx context.Context, id string) (scheduler.Job, bool, error) {
	if err := ctx.Err(); err != nil {
		return scheduler.Job{}, false, err
	}
	if id == "" {
		return scheduler.Job{}, false, nil
	}
	var raw []byte
	err := s.do(ctx, "read job", readOnly, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, `SELECT data FROM jobs WHERE id = $1`, id).Scan(&raw)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return scheduler.Job{}, false, nil
	}
	if err != nil {
		return scheduler.Job{}, false, err
	}
	j, err := decode[scheduler.Job]("job", id, raw)
	return j, err == nil, err
}

// Jobs returns every job ordered by ID.
func (s *Store) Jobs(ctx context.Context) ([]scheduler.Job, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return queryRecords[scheduler.Job](ctx, s, "job", `SELECT id, data FROM jobs ORDER BY id`)
}

// PutRun inserts or replaces a run and keeps the newest keep runs of its job
// (by StartedAt, then RunID).
func (s *Store) PutRun(ctx context.Context, r scheduler.Run, keep int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if strings.TrimSpace(r.JobID) == "" || strings.TrimSpace(r.RunID) == "" {
		return errors.New("postgres: run with empty job or run id")
	}
	raw, err := encode("run", r.JobID+"/"+r.RunID, r)
	if err != nil {
		return err
	}
	sec, nsec := timeKey(r.StartedAt)
	// Idempotent: an upsert by (job, run) and a prune to the newest keep.
	return s.inTx(ctx, "put run", idempotent, func(tx pgx.Tx) error {
		var b pgx.Batch
		b.Queue(`INSERT INTO job_runs (job_id, run_id, started_sec, started_nsec, data) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (job_id, run_id) DO UPDATE SET started_sec = excluded.started_sec,
	started_nsec = excluded.started_nsec, data = excluded.data`, r.JobID, r.RunID, sec, nsec, raw)
		if keep > 0 {
			b.Queue(`DELETE FROM job_runs WHERE job_id = $1 AND run_id NOT IN (
	SELECT run_id FROM job_runs WHERE job_id = $1
	ORDER BY started_sec DESC, started_nsec DESC, run_id DESC LIMIT $2)`, r.JobID, keep)
		}
		return tx.SendBatch(ctx, &b).Close()
	})
}

// Runs returns up to limit runs of a job, newest first.
func (s *Store) Runs(ctx context.Context, jobID string, limit int) ([]scheduler.Run, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if jobID == "" {
		return []scheduler.Run{}, nil
	}
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	return queryRecords[scheduler.Run](ctx, s, "run", `SELECT run_id, data FROM job_runs WHERE job_id = $1
ORDER BY started_sec DESC, started_nsec DESC, run_id DESC LIMIT $2`, jobID, lim)
}

// ClaimInstant claims a job's scheduled instant once: it succeeds only when
// the instant is after the newest one claimed for the job. The conditional
// upsert locks the ledger row, so concurrent claimers in any process
// serialise and the losers see the winner's instant. Each call writes a
// random claim token beside the instant, so replaying it after a lost
// COMMIT (store.ErrUnavailable retries) finds its own claim and still wins,
// while another claimer of the same instant, with another token, loses.
func (s *Store) ClaimInstant(ctx context.Context, jobID string, instant time.Time) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if jobID == "" {
		return false, errors.New("postgres: claim with empty job id")
	}
	return s.claimInstant(ctx, jobID, instant, randToken())
}

// claimInstant is ClaimInstant with its claim token.
func (s *Store) claimInstant(ctx context.Context, jobID string, instant time.Time, token string) (bool, error) {
	sec, nsec := timeKey(instant)
	var claimed bool
	err := s.do(ctx, "claim instant", idempotent, func(ctx context.Context) error {
		tag, err := s.pool.Exec(ctx, `INSERT INTO job_ledger AS l (job_id, instant_sec, instant_nsec, claim) VALUES ($1, $2, $3, $4)
ON CONFLICT (job_id) DO UPDATE SET instant_sec = excluded.instant_sec, instant_nsec = excluded.instant_nsec, claim = excluded.claim
WHERE (l.instant_sec, l.instant_nsec) < (excluded.instant_sec, excluded.instant_nsec)
	OR ((l.instant_sec, l.instant_nsec) = (excluded.instant_sec, excluded.instant_nsec) AND l.claim = excluded.claim)`,
			jobID, sec, nsec, token)
		claimed = err == nil && tag.RowsAffected() == 1
		return err
	})
	return claimed, err
}

// randToken is a random claim token (16 hex digits).
func randToken() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
