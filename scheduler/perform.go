package scheduler

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/sessionkey"
	"github.com/agentbot/agentbot/core/transcript"
)

// diagnose records a delivery's Rule 1 exception with the run (a warn
// diagnostic) and says whether there was one.
func (s *Scheduler) diagnose(r *Run, res delivery.Result, deliveryID string) bool {
	d, ok := res.Diagnostic(deliveryID)
	if !ok {
		return false
	}
	r.Diagnostics = append(r.Diagnostics, Diagnostic{Level: d.Level, Reason: d.Reason, DeliveryID: d.DeliveryID, Detail: d.Detail})
	return true
}

func jobMeta(j Job, r Run) map[string]string {
	m := map[string]string{"jobId": j.ID, "jobName": j.Name, "schedule": j.Schedule.Text, "runId": r.RunID}
	if r.Late {
		m["late"] = HumanDuration(r.LateBy)
	}
	return m
}

func lateNote(r Run) string {
	if !r.Late {
		return ""
	}
	return " (late by " + HumanDuration(r.LateBy) + ")"
}

// perform runs the job's turn(s) and delivery, filling r. Panics are
// recovered into an error status.
func (s *Scheduler) perform(ctx context.Context, j Job, r *Run) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error().Str("job", j.ID).Str("run", r.RunID).Interface("panic", p).Bytes("stack", debug.Stack()).Msg("job run panicked")
			r.Status, r.Error, r.Summary = StatusError, fmt.Sprintf("panic: %v", p), SummaryInternal
			if r.Delivery.Status == "" {
				r.Delivery.Status = DeliveryNotRequested
			}
		}
	}()
	if s.d.Authorizer != nil {
		if err := s.d.Authorizer.AuthorizeRun(ctx, j); err != nil {
			r.Status, r.Error = StatusError, "not authorized: "+err.Error()
			r.Delivery.Status, r.Delivery.Error = DeliveryNotRequested, r.Error
			return
		}
	}
	s.noteTools(ctx, j, r)
	if j.Mode() == ModeInChat {
		s.performInChat(ctx, j, r)
		return
	}
	s.performBackground(ctx, j, r)
}

func (s *Scheduler) performInChat(ctx context.Context, j Job, r *Run) {
	chat, ok := chatOf(j)
	if !ok {
		r.Status, r.Error, r.Summary = StatusError, fmt.Sprintf("in-chat target %q names no conversation", j.Target), SummaryNoTarget
		return
	}
	r.Delivery.Target = FormatTo(chat)
	res, err := s.d.Runner.RunJobTurn(ctx, InChatRun{
		JobID: j.ID, JobName: j.Name, RunID: r.RunID, AgentID: j.AgentID, DeliveryID: sessionkey.JobRunDelivery(j.ID, r.RunID),
		Conversation: chat, Prompt: j.Prompt,
		Trigger: "⏰ " + j.Name + lateNote(*r) + ": " + j.Prompt,
		Meta:    jobMeta(j, *r), ScheduledAt: r.ScheduledAt, Late: r.Late, LateBy: r.LateBy, CreatedBy: j.CreatedBy,
	})
	r.SessionKey = res.SessionKey // where the turn ran, not where the scheduler thinks it would
	ids := res.MessageIDs
	r.Delivery.MessageIDs = slices.Clone(ids)
	r.Summary = FailureSummary(err)
	switch {
	case errors.Is(err, ErrTurnFailed) && len(ids) > 0:
		// The turn failed, and the chat displayed the trigger and a
		// failure notice: the run failed, what it posted was delivered.
		r.Status, r.Error = StatusError, err.Error()
		r.Delivery.Status = DeliveryDelivered
	case err != nil:
		r.Status, r.Error = StatusError, err.Error()
		r.Delivery.Status, r.Delivery.Error = DeliveryFailed, err.Error()
	case len(ids) == 0:
		r.Status, r.Error, r.Summary = StatusError, "the turn returned no message ids: nothing was displayed", SummaryNothingShown
		r.Delivery.Status, r.Delivery.Error = DeliveryFailed, r.Error
	default:
		r.Status = StatusOK
		r.Delivery.Status = DeliveryDelivered
	}
}

func (s *Scheduler) performBackground(ctx context.Context, j Job, r *Run) {
	target, err := DeliveryTarget(j)
	if err != nil {
		r.Status, r.Error, r.Summary = StatusError, err.Error(), SummaryNoTarget
		return
	}
	r.SessionKey = sessionkey.CronRun(j.AgentID, j.ID, r.RunID)
	r.Delivery.Target = FormatTo(target)
	in := BackgroundRun{JobID: j.ID, RunID: r.RunID, AgentID: j.AgentID, SessionKey: r.SessionKey, Prompt: j.Prompt,
		CreatedBy: j.CreatedBy, Conversation: target}
	if j.Target == TargetCurrent {
		// A seed entry whose message was deleted since is erased and left out.
		in.Seed = slices.DeleteFunc(slices.Clone(j.Seed), func(e transcript.Entry) bool { return e.Deleted || e.IsChange() })
	}
	result, err := s.d.Background.RunBackground(ctx, in)
	if err != nil {
		r.Status, r.Error, r.Summary = StatusError, err.Error(), FailureSummary(err)
		return
	}
	result = strings.TrimSpace(result)
	if result == "" || strings.EqualFold(result, "NO_REPLY") {
		r.Status = StatusOK
		r.Delivery.Status = DeliveryNotRequested
		return
	}
	text := result
	if r.Late {
		text = "⏰ " + j.Name + lateNote(*r) + "\n" + result
	}
	res, err := s.d.Deliverer.Deliver(ctx, delivery.Delivery{
		ID: sessionkey.JobRunDelivery(j.ID, r.RunID), Target: target, Text: text,
		Producer: delivery.Producer{Source: transcript.SourceJob, AgentID: j.AgentID, Meta: jobMeta(j, *r)},
	}, nil)
	if err == nil && len(res.MessageIDs) == 0 {
		err = errors.New("no message id in the delivery receipt")
	}
	if err != nil {
		// The result did not reach the chat: the run failed at what it is for.
		r.Status, r.Error = StatusError, "delivery failed: "+err.Error()
		r.Summary = FailureSummary(err)
		if !strings.HasPrefix(r.Summary, summaryDeliveryPrefix) {
			r.Summary = summaryDeliveryPrefix
		}
		r.Delivery.Status, r.Delivery.Error = DeliveryFailed, err.Error()
		return
	}
	s.diagnose(r, res, sessionkey.JobRunDelivery(j.ID, r.RunID))
	r.Status = StatusOK
	r.Delivery.Status, r.Delivery.MessageIDs = DeliveryDelivered, slices.Clone(res.MessageIDs)
}
