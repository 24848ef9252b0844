package scheduler

import (
	"context"
	"fmt"
	"slices"

	"github.com/agentbot/agentbot/core/transcript"
)

// EraseEntry erases the copies of a deleted message's entry in the seeds
// (history snapshots) of `target: current` jobs (invariant 17): the copy
// stays, marked Deleted, without its text, so the job's runs no longer see
// it. It implements transcript.Eraser; it goes through updateJob so a
// concurrent state write cannot bring the text back.
func (s *Scheduler) EraseEntry(ctx context.Context, e transcript.Entry) error {
	jobs, err := s.st.Jobs(ctx)
	if err != nil {
		return fmt.Errorf("erase seeds: %w", err)
	}
	for _, j := range jobs {
		if !slices.ContainsFunc(j.Seed, func(x transcript.Entry) bool { return sameEntry(x, e) }) {
			continue
		}
		err := s.updateJob(ctx, j.ID, func(j *Job) {
			for i := range j.Seed {
				if sameEntry(j.Seed[i], e) {
					j.Seed[i].Text, j.Seed[i].Deleted = "", true
				}
			}
		})
		if err != nil {
			return fmt.Errorf("erase seed of job %s: %w", j.ID, err)
		}
	}
	return nil
}

func sameEntry(x, e transcript.Entry) bool {
	return x.SessionKey == e.SessionKey && x.Seq == e.Seq
}
