package scheduler

import (
	"context"
	"fmt"
	"strings"
)

// Finding is one problem Diagnose found in the stored jobs.
type Finding struct {
	JobID   string `json:"jobId"`
	JobName string `json:"jobName"`
	// Problem says what is wrong.
	Problem string `json:"problem"`
	// Fix says what Fix does (or did) about it; "" when it needs a person.
	Fix string `json:"fix,omitempty"`
	// Warning is what the fix changes for the user (e.g. lost context).
	Warning string `json:"warning,omitempty"`
	// Fixed is set on findings returned by Fix that were applied.
	Fixed bool `json:"fixed"`
}

// Diagnose finds jobs that break Rule 2 or cannot run:
//   - an in-chat job that delivers outside its own chat (an old-style
//     `session:<key>` job delivering elsewhere that still runs in <key>, or
//     a main job with `to` elsewhere): fixable, it becomes a background job
//     with its own session and loses <key>'s history;
//   - a job stored without a mode: fixable, it gets the mode its target requires;
//   - a schedule that no longer parses: reported, needs a person.
func Diagnose(ctx context.Context, st Store) ([]Finding, error) {
	fs, _, err := diagnose(ctx, st)
	return fs, err
}

// Fix applies every fixable finding, saves the jobs and returns all
// findings, the applied ones marked Fixed. Fixing twice finds nothing new.
func Fix(ctx context.Context, st Store) ([]Finding, error) {
	fs, fixed, err := diagnose(ctx, st)
	if err != nil {
		return nil, err
	}
	for i := range fs {
		j, ok := fixed[fs[i].JobID]
		if !ok || fs[i].Fix == "" {
			continue
		}
		if err := st.PutJob(ctx, j); err != nil {
			return fs, fmt.Errorf("doctor: save job %s: %w", j.ID, err)
		}
		fs[i].Fixed = true
	}
	return fs, nil
}

func diagnose(ctx context.Context, st Store) ([]Finding, map[string]Job, error) {
	jobs, err := st.Jobs(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("doctor: list jobs: %w", err)
	}
	var out []Finding
	fixed := map[string]Job{}
	for _, j := range jobs {
		if _, err := FromSpec(j.Schedule); err != nil {
			out = append(out, Finding{JobID: j.ID, JobName: j.Name,
				Problem: fmt.Sprintf("schedule %q cannot be read (%v); remove the job and add it again", j.Schedule.Text, err)})
		}
		req := RequiredMode(j)
		switch {
		case j.StoredMode == ModeInChat && (req == ModeBackground || deliversElsewhere(j)):
			nj, f := toBackground(j)
			fixed[j.ID] = nj
			out = append(out, f)
		case j.StoredMode == "":
			nj := j
			nj.StoredMode = req
			fixed[j.ID] = nj
			out = append(out, Finding{JobID: j.ID, JobName: j.Name,
				Problem: "the job has no mode (stored before jobs had modes)",
				Fix:     fmt.Sprintf("mark it %s, as target %q requires", req, j.Target)})
		case j.StoredMode != ModeInChat && j.StoredMode != ModeBackground:
			nj := j
			nj.StoredMode = req
			fixed[j.ID] = nj
			out = append(out, Finding{JobID: j.ID, JobName: j.Name,
				Problem: fmt.Sprintf("unknown mode %q", j.StoredMode),
				Fix:     fmt.Sprintf("mark it %s, as target %q requires", req, j.Target)})
		}
	}
	return out, fixed, nil
}

// deliversElsewhere reports whether a job's `to` names a conversation other
// than the chat its in-chat target runs in.
func deliversElsewhere(j Job) bool {
	if j.To == "" {
		return false
	}
	c, ok := chatOf(j)
	if !ok {
		return true
	}
	to, err := ParseTo(j.To, j.CreatedIn)
	return err != nil || !sameConversation(to, c)
}

// toBackground converts an in-chat job that delivers elsewhere into a
// background job with its own (fresh per run) session.
func toBackground(j Job) (Job, Finding) {
	nj := j
	nj.StoredMode = ModeBackground
	f := Finding{JobID: j.ID, JobName: j.Name}
	to := j.To
	if key, ok := strings.CutPrefix(j.Target, SessionTargetPrefix); ok {
		f.Problem = fmt.Sprintf("target session:%s delivers to %s but runs in-chat in %s: its runs are written into a conversation that never displays them (Rule 2)", key, to, key)
		f.Fix = "convert it to a background job with its own session per run; only its result is posted to " + to
		f.Warning = fmt.Sprintf("the job no longer sees %s's history", key)
	} else {
		f.Problem = fmt.Sprintf("target %s is marked in-chat but delivers to %s, outside its own chat (Rule 2)", j.Target, to)
		f.Fix = "convert it to a background job with its own session per run; only its result is posted to " + to
		if j.Target == TargetMain {
			nj.Target = TargetIsolated
			f.Fix = "convert it to a background job (target main becomes isolated, its own session per run); only its result is posted to " + to
		}
		f.Warning = "the job no longer runs in the history of the chat it was created in"
	}
	return nj, f
}
