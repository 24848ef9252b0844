package console

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentbot/agentbot/scheduler"
)

type runRow struct {
	RunID, Trigger, Status, Error, Session      string
	Scheduled, Started, Finished                string
	Late                                        string
	Missed                                      int
	Delivery, DeliveryError, Messages, DeliveTo string
	Bad                                         bool
	// Diagnostics are the run's warnings ("warn: <reason>: <detail>").
	Diagnostics []string
}

type jobRow struct {
	ID, Name, Mode, Schedule, Zone, Target, To, Prompt string
	Enabled                                            bool
	Disabled                                           string
	NextJob, NextLocal                                 string
	Failures                                           int
	LastStatus, LastError                              string
	Late                                               string // why the job is late, "" when it is not
	AutoDisabled                                       bool
	Runs                                               []runRow
	Describe                                           string
}

func jobLoc(j scheduler.Job, def *time.Location) *time.Location {
	if j.Schedule.TZ != "" {
		if l, err := time.LoadLocation(j.Schedule.TZ); err == nil {
			return l
		}
	}
	return def
}

func (c *Console) runRow(r scheduler.Run) runRow {
	row := runRow{RunID: r.RunID, Trigger: r.Trigger, Status: string(r.Status), Error: preview(r.Error, 200), Session: r.SessionKey,
		Scheduled: c.fmtTime(r.ScheduledAt), Started: c.fmtTime(r.StartedAt), Finished: c.fmtTime(r.FinishedAt), Missed: r.Missed,
		Delivery: string(r.Delivery.Status), DeliveryError: preview(r.Delivery.Error, 200), Messages: strings.Join(r.Delivery.MessageIDs, ", "),
		DeliveTo: r.Delivery.Target,
		Bad:      r.Status == scheduler.StatusError || r.Delivery.Status == scheduler.DeliveryFailed}
	for _, d := range r.Diagnostics {
		row.Diagnostics = append(row.Diagnostics, d.Level+": "+d.Reason+": "+d.Detail)
	}
	if r.Late {
		row.Late = "late"
		if r.LateBy > 0 {
			row.Late = "late by " + human(r.LateBy)
		}
	}
	return row
}

func (c *Console) jobRow(ctx context.Context, j scheduler.Job, runs int, now time.Time) (jobRow, error) {
	loc := jobLoc(j, time.UTC)
	row := jobRow{ID: j.ID, Name: j.Name, Mode: string(j.Mode()), Schedule: scheduler.ScheduleWords(j.Schedule, loc), Zone: loc.String(),
		Target: j.Target, To: j.To, Prompt: preview(j.Prompt, 200), Enabled: j.Enabled, Disabled: j.State.DisabledReason,
		NextJob: fmtIn(j.State.NextRunAt, loc), NextLocal: c.fmtTime(j.State.NextRunAt), Failures: j.State.ConsecutiveFailures,
		LastStatus: string(j.State.LastStatus), LastError: preview(j.State.LastError, 200),
		AutoDisabled: !j.Enabled && j.State.DisabledReason == scheduler.DisabledFailures,
		Describe:     scheduler.Describe(j, time.UTC)}
	if j.Enabled && !j.State.NextRunAt.IsZero() && now.Sub(j.State.NextRunAt) > lateGrace {
		row.Late = "overdue by " + human(now.Sub(j.State.NextRunAt))
	}
	rs, err := c.o.Store.Runs(ctx, j.ID, runs)
	if err != nil {
		return row, err
	}
	for _, r := range rs {
		row.Runs = append(row.Runs, c.runRow(r))
	}
	if row.Late == "" && len(rs) > 0 && rs[0].Late {
		row.Late = "last run " + c.runRow(rs[0]).Late
	}
	return row, nil
}

type jobsPage struct {
	base
	Jobs []jobRow
}

func (c *Console) jobs(r *http.Request) (any, error) {
	js, err := c.o.Store.Jobs(r.Context())
	if err != nil {
		return nil, err
	}
	now := c.o.Now()
	p := jobsPage{base: c.base("jobs", "Jobs and runs")}
	for _, j := range js {
		row, err := c.jobRow(r.Context(), j, runsPerJob, now)
		if err != nil {
			return nil, err
		}
		p.Jobs = append(p.Jobs, row)
	}
	return p, nil
}

type jobPage struct {
	base
	Job   jobRow
	Rows  []runRow
	Pager pager
}

func (c *Console) job(r *http.Request) (any, error) {
	page, err := pageParam(r)
	if err != nil {
		return nil, err
	}
	id := r.PathValue("id")
	js, err := c.o.Store.Jobs(r.Context())
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(js, func(j scheduler.Job) bool { return j.ID == id })
	if i < 0 {
		return nil, notFound("job %q not found", id)
	}
	row, err := c.jobRow(r.Context(), js[i], 0, c.o.Now())
	if err != nil {
		return nil, err
	}
	lo, hi, pg := paginate(page, c.o.PageSize, len(row.Runs), func(n int) string {
		return query("/jobs/"+url.PathEscape(id), "page", strconv.Itoa(n))
	})
	p := jobPage{base: c.base("jobs", "Job "+js[i].Name), Job: row, Rows: row.Runs[lo:hi], Pager: pg}
	return p, nil
}
