package console

import (
	"net/http"
	"time"

	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/core/session"
)

type countRow struct {
	State string
	Count int
	URL   string
}

type overviewPage struct {
	base
	Gateway, Started, Uptime  string
	Ready, Known              bool
	ActiveBindings, Ended     int
	RunningSubagents, AllSubs int
	EnabledJobs, AllJobs      int
	LastHour                  []countRow
	LastHourTotal             int
	LastHourCapped            bool
	Failures                  []deliveryRow
	Attention                 []jobRow
}

func (c *Console) overview(r *http.Request) (any, error) {
	ctx := r.Context()
	now := c.o.Now()
	p := overviewPage{base: c.base("overview", "Overview"), Gateway: "unknown", Started: "—", Uptime: "—"}
	if c.o.Status != nil {
		st := c.o.Status()
		p.Known, p.Ready = true, st.Ready
		p.Gateway = "connecting"
		if st.Ready {
			p.Gateway = "ready"
		}
		if !st.Started.IsZero() {
			p.Started, p.Uptime = c.fmtTime(st.Started), human(now.Sub(st.Started))
		}
	}
	recs, err := c.allBindings(ctx)
	if err != nil {
		return nil, err
	}
	for _, b := range recs {
		if !isActive(b) {
			break // sorted: active ones first
		}
		p.ActiveBindings++
	}
	p.Ended = len(recs) - p.ActiveBindings
	infos, err := c.o.Store.SessionInfos(ctx)
	if err != nil {
		return nil, err
	}
	for _, in := range infos {
		if in.Kind == session.KindSubagent {
			p.AllSubs++
			if in.Status == session.StatusRunning {
				p.RunningSubagents++
			}
		}
	}
	js, err := c.o.Store.Jobs(ctx)
	if err != nil {
		return nil, err
	}
	p.AllJobs = len(js)
	for _, j := range js {
		if j.Enabled {
			p.EnabledJobs++
		}
		row, err := c.jobRow(ctx, j, 1, now)
		if err != nil {
			return nil, err
		}
		if row.Late != "" || row.AutoDisabled {
			p.Attention = append(p.Attention, row)
		}
	}
	// Deliveries of the last hour, by state (newest first: stop at the hour).
	recent, err := c.o.Store.Deliveries(ctx, "", hourScanCap)
	if err != nil {
		return nil, err
	}
	counts := map[delivery.PendingState]int{}
	since := now.Add(-time.Hour)
	n := 0
	for _, d := range recent {
		if d.CreatedAt.Before(since) {
			break
		}
		counts[d.State]++
		n++
	}
	p.LastHourTotal, p.LastHourCapped = n, n == hourScanCap
	for _, s := range deliveryStates {
		p.LastHour = append(p.LastHour, countRow{State: string(s), Count: counts[s], URL: query("/deliveries", "state", string(s))})
	}
	failed, err := c.o.Store.Deliveries(ctx, delivery.StateFailed, failuresShown)
	if err != nil {
		return nil, err
	}
	for _, d := range failed {
		p.Failures = append(p.Failures, c.deliveryRow(d))
	}
	return p, nil
}
