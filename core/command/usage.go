package command

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/usage"
)

// Usage is what /usage needs: the usage records (core/usage.Meter) and
// the server or room a conversation belongs to (the platform's answer).
type Usage interface {
	Usage(ctx context.Context, f usage.Filter) ([]usage.Record, error)
}

// Places tells the server or room of a conversation ("" for a DM).
type Places interface {
	Place(ctx context.Context, conv binding.ConversationRef) (string, error)
}

// usagePeriods are /usage's periods.
var usagePeriods = map[string]time.Duration{"day": 24 * time.Hour, "week": 7 * 24 * time.Hour, "month": 30 * 24 * time.Hour}

// usageTop is how many users and agents the server's part lists.
const usageTop = 5

// usage answers /usage [period]: the caller's own tokens and cost by model;
// an operator of THIS conversation's server also gets the server's totals,
// top users and agents (invariant 13: the target's server decides, and a
// DM has no server part). Ephemeral; where replies are public (Matrix) it
// shows only the caller's usage in this room.
func (c *Commands) usage(ctx context.Context, v Invocation) (Reply, error) {
	if c.d.Usage == nil {
		return Reply{}, userErrf("Usage accounting is not available here.")
	}
	period := strings.ToLower(v.Str("period"))
	if period == "" {
		period = "day"
	}
	d, ok := usagePeriods[period]
	if !ok {
		return Reply{}, userErrf("Period %q is unknown: use day, week or month.", period)
	}
	since := c.now().Add(-d)
	place := ""
	if c.d.Places != nil {
		var err error
		if place, err = c.d.Places.Place(ctx, v.Conversation); err != nil {
			return Reply{}, fmt.Errorf("usage: server of %s: %w", v.Conversation.ConversationID, err)
		}
	}
	// Where every reply is public (Matrix), a room sees only what was spent
	// in it by the caller: not their usage elsewhere, not other users'.
	public := v.Platform.PublicReplies && place != ""
	f := usage.Filter{Since: since, User: v.UserID}
	where := ""
	if public {
		f.Place, where = place, " here"
	}
	own, err := c.d.Usage.Usage(ctx, f)
	if err != nil {
		return Reply{}, fmt.Errorf("usage: %w", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "📊 Your usage%s, last %s: %s\n", where, period, totals(usage.Sum(own)))
	for _, row := range usage.By(own, usage.ByModel) {
		fmt.Fprintf(&b, "• %s: %s\n", row.Key, totals(row.Totals))
	}
	if place != "" && !public && c.d.Authority.Operator(ctx, v.actor(), v.Conversation) {
		all, err := c.d.Usage.Usage(ctx, usage.Filter{Since: since, Place: place})
		if err != nil {
			return Reply{}, fmt.Errorf("usage: %w", err)
		}
		fmt.Fprintf(&b, "\nThis server, last %s: %s\nTop users:\n", period, totals(usage.Sum(all)))
		for _, row := range top(usage.By(all, usage.ByUser)) {
			who := "(nobody: background)"
			if row.Key != "" {
				who = v.Platform.mention(row.Key)
			}
			fmt.Fprintf(&b, "• %s: %s\n", who, totals(row.Totals))
		}
		b.WriteString("Top agents:\n")
		for _, row := range top(usage.By(all, usage.ByAgent)) {
			fmt.Fprintf(&b, "• %s: %s\n", row.Key, totals(row.Totals))
		}
	}
	return Reply{Text: strings.TrimRight(b.String(), "\n")}, nil
}

func top(rows []usage.Row) []usage.Row { return rows[:min(len(rows), usageTop)] }

// totals renders tokens and cost in one line.
func totals(t usage.Totals) string {
	return fmt.Sprintf("%d tokens (%d in, %d out, %d cached) in %d calls, cost %.4f", t.Tokens(), t.Input, t.Output, t.Cached, t.Calls, t.Cost)
}
