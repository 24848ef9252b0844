// Package scheduler runs jobs: prompts on a schedule (5-field cron with an
// IANA zone, `every <duration>`, `at <RFC 3339>`), in one of two modes.
//
// Invariants (Rule 2 of the transcript-ownership design):
//   - A job is in-chat or background, fixed at creation (Job.StoredMode) and
//     shown to the user. Target main is in-chat; isolated and current are
//     background; session:<key> is in-chat when it delivers to <key>'s own
//     conversation and background otherwise. Add refuses an in-chat job
//     whose `to` names another chat, saying which target to use instead.
//   - An in-chat run is a turn in its own chat, run by the session layer
//     (ChatRunner): it posts the visible trigger line "⏰ <job name>: <prompt>"
//     and the reply there, and only there.
//   - A background run has its own fresh session (sessionkey.CronRun; target
//     current is seeded with a snapshot of the creating chat taken at
//     creation and stored with the job). Its turns stay in that session; only
//     the final result is delivered, through the Deliverer (core/delivery
//     Outbound, the single writer), with delivery id job:<job>:run:<run>,
//     source job and meta {jobId, jobName, schedule, runId}. This package
//     writes no transcript entry, ever.
//   - A run is "delivered" only from a receipt (message ids). A failed
//     delivery is a failed run with its reason.
//   - No scheduled instant runs twice, across restarts: each run claims its
//     instant in the store's ledger first (Store.ClaimInstant).
//   - After downtime a job runs once for all its missed instants, marked late
//     ("late by 3h") in the trigger/result text and the run history, unless
//     catchUpMissed is off (then the missed instants are recorded as skipped).
//   - One run at a time per job; a panicking run is recovered as an error.
//   - Failures: backoff 30s, 1m, 5m, 15m, 60m keeps recurring jobs on their
//     grid (the first instant after the backoff); 10 consecutive failures
//     turn a job off with a notice; failure alerts after failureAlert.after
//     consecutive failures, at most once per cooldown, go through the
//     Deliverer to the job's delivery target with an id fixed per (job, run).
//   - Time is read only from the injected clock. robfig/cron is only the
//     trigger (its Schedule asks the scheduler for the next run); next-run
//     computation and policy are plain functions (NextRun, PlanDue,
//     Backoff, ShouldAlert), and tests drive RunDue with a fake clock.
//   - DST, for cron expressions with a fixed hour: a wall time skipped by
//     spring-forward runs at the end of the gap (once); a wall time repeated
//     by fall-back runs at its first occurrence only. `every` and `at` are
//     absolute durations/instants and ignore DST.
package scheduler
