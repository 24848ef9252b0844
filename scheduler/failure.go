package scheduler

import (
	"errors"
	"strings"

	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/model"
)

// Failure summaries: what a chat is told about a failed run. They name the
// kind of failure only; the full error stays in the run record (the job's runs,
// inspect, the console), never in a chat.
const (
	SummaryInterrupted    = "interrupted: the bot stopped during the run"
	SummaryInternal       = "internal error"
	SummaryNoTarget       = "the job's target names no chat"
	SummaryNothingShown   = "nothing was displayed"
	summaryModelPrefix    = "model error"
	summaryDeliveryPrefix = "delivery failed"
)

// FailureSummary classifies a run's error into a short text for a chat:
// "model error (timeout)", "delivery failed: chat deleted, archived or
// locked", ... It never contains the error's own text.
func FailureSummary(err error) string {
	if err == nil {
		return ""
	}
	var me *model.Error
	if errors.As(err, &me) {
		return summaryModelPrefix + " (" + string(me.Kind) + ")"
	}
	switch {
	case errors.Is(err, delivery.ErrDestinationGone):
		return summaryDeliveryPrefix + ": chat deleted, archived or locked"
	case errors.Is(err, delivery.ErrForbidden):
		return summaryDeliveryPrefix + ": missing permission"
	case errors.Is(err, delivery.ErrUnknownPlatform):
		return summaryDeliveryPrefix + ": this bot does not post to that chat platform"
	case errors.Is(err, delivery.ErrRejected):
		return summaryDeliveryPrefix + ": message rejected by Discord"
	case errors.Is(err, delivery.ErrTransient):
		return summaryDeliveryPrefix + ": Discord did not confirm the send"
	case errors.Is(err, delivery.ErrClaimed):
		return summaryDeliveryPrefix + ": another process holds the delivery"
	}
	var fe *delivery.FailedError
	if errors.As(err, &fe) {
		return summaryDeliveryPrefix
	}
	if errors.Is(err, ErrTurnFailed) {
		return "the job's turn failed"
	}
	return SummaryInternal
}

// summaryOf is the summary recorded with a run, for alerts; runs recorded
// before summaries existed get a generic one.
func summaryOf(r Run) string {
	if s := strings.TrimSpace(r.Summary); s != "" {
		return s
	}
	return "failed"
}
