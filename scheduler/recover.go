package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/sessionkey"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/core/usertext"
)

// RecoverInterrupted finishes the runs a previous process left `running`
// (it was killed during the run: the instant is claimed, so it is not run
// again). Each ends in a terminal, visible state (docs/DECISIONS.md):
//
//   - its result was confirmed before the crash (the reply or the
//     background result delivery is in the outbox as delivered): the run
//     is recorded as it happened, ok and delivered, with those message ids;
//   - otherwise the run failed: status error ("interrupted"), counted
//     towards failure alerts and auto-disable like any failure, and a short
//     notice is posted into the job's chat (its delivery target) saying the
//     run was interrupted and has no result.
//
// It is not run again: a model turn may have had effects (tool calls) that
// a second run would repeat, and the next instant runs as scheduled.
// A job running in this process right now is left alone. Run calls it at
// start, before the catch-up pass.
func (s *Scheduler) RecoverInterrupted(ctx context.Context) (int, error) {
	jobs, err := s.st.Jobs(ctx)
	if err != nil {
		return 0, fmt.Errorf("scheduler: recover interrupted runs: list jobs: %w", err)
	}
	n := 0
	var errs []error
	for _, j := range jobs {
		if !s.acquire(j.ID) {
			continue // running here: its own run finishes it
		}
		done, err := s.recoverJob(ctx, j.ID)
		s.release(j.ID)
		n += done
		if err != nil {
			errs = append(errs, err)
		}
	}
	return n, errors.Join(errs...)
}

func (s *Scheduler) recoverJob(ctx context.Context, id string) (int, error) {
	runs, err := s.st.Runs(ctx, id, 0)
	if err != nil {
		return 0, fmt.Errorf("job %s: list runs: %w", id, err)
	}
	slices.Reverse(runs) // oldest first: the job's state ends at the newest
	n := 0
	for _, r := range runs {
		if r.Status != StatusRunning {
			continue
		}
		j, ok, err := s.st.Job(ctx, id)
		if err != nil || !ok {
			return n, err
		}
		sched, err := FromSpec(j.Schedule)
		if err != nil {
			return n, fmt.Errorf("job %s: %w", id, err)
		}
		s.settleInterrupted(ctx, j, &r)
		if _, err := s.finish(ctx, j, sched, r); err != nil {
			return n, err
		}
		s.log.Warn().Str("job", id).Str("run", r.RunID).Str("status", string(r.Status)).
			Str("delivery", string(r.Delivery.Status)).Msg("job run interrupted by a restart: finished")
		n++
	}
	return n, nil
}

// settleInterrupted decides what an interrupted run became (see
// RecoverInterrupted) and posts the notice of a failed one.
func (s *Scheduler) settleInterrupted(ctx context.Context, j Job, r *Run) {
	now := s.clk.Now()
	r.FinishedAt = now
	runDelivery := sessionkey.JobRunDelivery(j.ID, r.RunID)
	var shown []string
	if j.Mode() == ModeInChat {
		if rec, ok := s.delivered(ctx, runDelivery+":trigger"); ok {
			shown = append(shown, rec.MessageIDs...)
		}
	}
	if rec, ok := s.delivered(ctx, runDelivery); ok {
		// The result was displayed before the crash: the run happened.
		r.Status, r.Error, r.Summary = StatusOK, "", ""
		r.Delivery.Status, r.Delivery.Error = DeliveryDelivered, ""
		r.Delivery.MessageIDs = append(shown, rec.MessageIDs...)
		if rec.Delivery.Producer.Source == transcript.SourceNotice {
			// An in-chat turn's failure notice: the turn failed.
			r.Status, r.Error, r.Summary = StatusError, "the job's turn failed (recorded after a restart)", "the job's turn failed"
		}
		return
	}
	r.Status, r.Summary = StatusError, SummaryInterrupted
	r.Error = "interrupted: the bot stopped (killed or crashed) during this run; it was not run again"
	r.Delivery.MessageIDs = shown
	target, err := DeliveryTarget(j)
	if err != nil {
		r.Delivery.Status, r.Delivery.Error = DeliveryFailed, "interrupted before its result was delivered"
		return
	}
	r.Delivery.Target = FormatTo(target)
	when := r.StartedAt.In(s.jobLoc(j)).Format("2006-01-02 15:04 MST")
	text := fmt.Sprintf("⚠️ Job %s (`%s`): the run started at %s was interrupted (the bot stopped), so it has no result. "+
		"It is not run again", j.Name, j.ID, when)
	text += usertext.Line(s.d.Hints.For(target), j.ID, "; see %s, or run it now with %s", HintJobRuns, HintRunJob) + "."
	id := "job:" + j.ID + ":interrupted:" + r.RunID
	res, err := s.d.Deliverer.Deliver(context.WithoutCancel(ctx), delivery.Delivery{
		ID: id, Target: target, Text: text,
		Producer: delivery.Producer{Source: transcript.SourceNotice, AgentID: j.AgentID, Meta: jobMeta(j, *r)},
	}, nil)
	if err != nil || len(res.MessageIDs) == 0 {
		s.log.Warn().Err(err).Str("job", j.ID).Str("delivery", id).Msg("interrupted-run notice not delivered")
		r.Delivery.Status, r.Delivery.Error = DeliveryFailed, "interrupted before its result was delivered; the notice failed too"
		return
	}
	s.diagnose(r, res, id)
	r.Delivery.MessageIDs = append(r.Delivery.MessageIDs, res.MessageIDs...)
	// What the chat shows (trigger, notice) was delivered; the run failed.
	r.Delivery.Status, r.Delivery.Error = DeliveryDelivered, ""
}

// delivered returns the outbox record of a confirmed delivery.
func (s *Scheduler) delivered(ctx context.Context, id string) (delivery.Record, bool) {
	if s.d.Outbox == nil {
		return delivery.Record{}, false
	}
	rec, ok, err := s.d.Outbox.GetDelivery(ctx, id)
	if err != nil {
		s.log.Warn().Err(err).Str("delivery", id).Msg("look up an interrupted run's delivery")
		return delivery.Record{}, false
	}
	if !ok || (rec.State != delivery.StateDelivered && rec.State != delivery.StateSent) || len(rec.MessageIDs) == 0 {
		return delivery.Record{}, false
	}
	return rec, true
}
