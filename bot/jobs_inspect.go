package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentbot/agentbot/scheduler"
)

// jobJSON is the scripting contract of `bot inspect jobs -json`.
type jobJSON struct {
	ID        string         `json:"id"`
	Name      string         `json:"name"`
	Schedule  string         `json:"schedule"`
	TZ        string         `json:"tz"`
	Prompt    string         `json:"prompt"`
	Target    string         `json:"target"`
	To        string         `json:"to"`
	Mode      scheduler.Mode `json:"mode"`
	Enabled   bool           `json:"enabled"`
	NextRunAt *time.Time     `json:"nextRunAt"`
}

// runJSON is the scripting contract of `bot inspect runs -json`.
type runJSON struct {
	JobID       string     `json:"jobId"`
	RunID       string     `json:"runId"`
	ScheduledAt *time.Time `json:"scheduledAt"`
	StartedAt   time.Time  `json:"startedAt"`
	FinishedAt  *time.Time `json:"finishedAt"`
	Status      string     `json:"status"`
	Late        bool       `json:"late"`
	Error       string     `json:"error,omitempty"`
	Summary     string     `json:"summary,omitempty"`
	Delivery    struct {
		Status     string   `json:"status"`
		MessageIDs []string `json:"messageIds"`
		Error      string   `json:"error"`
	} `json:"delivery"`
	// Diagnostics are the run's warnings (Rule 1 exceptions); always present.
	Diagnostics []diagnosticJSON `json:"diagnostics"`
}

// diagnosticJSON is one run diagnostic in the scripting contract.
type diagnosticJSON struct {
	Level      string `json:"level"`
	Reason     string `json:"reason"`
	DeliveryID string `json:"deliveryId"`
	Detail     string `json:"detail"`
}

// diagnosticsText is the DIAGNOSTICS column: level:reason, comma separated.
func diagnosticsText(ds []scheduler.Diagnostic) string {
	if len(ds) == 0 {
		return "-"
	}
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = d.Level + ":" + d.Reason
	}
	return strings.Join(parts, ",")
}

func inspectJobs(ctx context.Context, st Store, w io.Writer, asJSON bool) error {
	jobs, err := st.Jobs(ctx)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if !asJSON {
		fmt.Fprintln(tw, "JOB\tNAME\tMODE\tENABLED\tSCHEDULE\tTARGET\tNEXT RUN")
	}
	for _, j := range jobs {
		if asJSON {
			if err := enc.Encode(jobJSON{ID: j.ID, Name: j.Name, Schedule: j.Schedule.Text, TZ: j.Schedule.TZ, Prompt: j.Prompt, Target: j.Target,
				To: j.To, Mode: j.Mode(), Enabled: j.Enabled, NextRunAt: timePtr(j.State.NextRunAt)}); err != nil {
				return err
			}
			continue
		}
		next := "-"
		if !j.State.NextRunAt.IsZero() {
			next = j.State.NextRunAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%s\t%s\t%s\n", j.ID, j.Name, j.Mode(), j.Enabled, j.Schedule.Text, j.Target, next)
	}
	return tw.Flush()
}

func inspectRuns(ctx context.Context, st Store, w io.Writer, jobID string, asJSON bool) error {
	var ids []string
	if jobID != "" {
		if _, ok, err := st.Job(ctx, jobID); err != nil {
			return err
		} else if !ok {
			return fmt.Errorf("job %q: %w", jobID, ErrNotFound)
		}
		ids = []string{jobID}
	} else {
		jobs, err := st.Jobs(ctx)
		if err != nil {
			return err
		}
		for _, j := range jobs {
			ids = append(ids, j.ID)
		}
	}
	enc := json.NewEncoder(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if !asJSON {
		fmt.Fprintln(tw, "JOB\tRUN\tSCHEDULED\tSTARTED\tSTATUS\tLATE\tDELIVERY\tMESSAGES\tDIAGNOSTICS")
	}
	for _, id := range ids {
		runs, err := st.Runs(ctx, id, 0)
		if err != nil {
			return err
		}
		for _, r := range runs {
			if asJSON {
				out := runJSON{JobID: r.JobID, RunID: r.RunID, ScheduledAt: timePtr(r.ScheduledAt), StartedAt: r.StartedAt, FinishedAt: timePtr(r.FinishedAt),
					Status: string(r.Status), Late: r.Late, Error: r.Error, Summary: r.Summary, Diagnostics: []diagnosticJSON{}}
				for _, d := range r.Diagnostics {
					out.Diagnostics = append(out.Diagnostics, diagnosticJSON(d))
				}
				out.Delivery.Status, out.Delivery.MessageIDs, out.Delivery.Error = string(r.Delivery.Status), r.Delivery.MessageIDs, r.Delivery.Error
				if out.Delivery.MessageIDs == nil {
					out.Delivery.MessageIDs = []string{}
				}
				if err := enc.Encode(out); err != nil {
					return err
				}
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%v\t%s\t%v\t%s\n", r.JobID, r.RunID, r.ScheduledAt.UTC().Format(time.RFC3339), r.StartedAt.UTC().Format(time.RFC3339),
				r.Status, r.Late, r.Delivery.Status, r.Delivery.MessageIDs, diagnosticsText(r.Diagnostics))
		}
	}
	return tw.Flush()
}
