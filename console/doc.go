// Package console is the bot's read-only operator web console: a few
// server-rendered pages (html/template, templates embedded, inline CSS, no
// scripts, no external assets; works offline) that answer "is it alive, what
// failed, what is late, where did that result go?" at a glance.
//
// Pages (all GET/HEAD):
//
//	/                  overview: gateway state, uptime, counts, last failures, late or auto-disabled jobs
//	/bindings          bindings, active first, with idle and max-age countdowns; ended ones with reasons
//	/jobs, /jobs/{id}  jobs with schedule in words and zone, mode, next run, last runs and receipts
//	/sessions          session keys that have a transcript
//	/sessions/{key}    the promise: each message as the chat displays it beside its transcript entry and
//	                   delivery, the audit's differences highlighted; sends that never reached the chat
//	/deliveries        recent deliveries, filtered by state and reason
//
// The console reads through the Store interface declared here (satisfied by
// *bolt.Store), the same queries `bot inspect` uses. It never reads the
// webhook credential bucket. The conversation view also asks Options.Audit,
// when set, what the platform displays now (read-only, bounded by the
// audit's window).
//
// Invariants (each has a test in this package):
//   - Read-only: no page changes state. Only GET and HEAD are served; any other
//     method gets 405 Method Not Allowed. The Store interface has no writer.
//   - No secrets: Discord bot tokens, webhook tokens and interaction tokens
//     never appear in a page. The console does not read webhook credentials,
//     interaction data is not persisted, and any free text it shows
//     (transcripts, errors, reasons) passes through Redact, which replaces
//     token-looking strings with "[redacted]" by the rules of
//     internal/redact, the one redactor of the process.
//   - Loopback or token: CheckAccess refuses a non-loopback http.listen
//     without http.token, and when a token is set every request must carry it
//     in the Authorization header, either "Bearer <token>" (scripts, curl) or
//     HTTP Basic auth with the token as the password (browsers prompt for it;
//     the user name is ignored). Tokens are never accepted in the URL, so they
//     do not end up in browser history, proxy logs or Referer headers, and no
//     cookie is ever set.
//
// Pages stay fast on large stores: transcripts are read a page at a time
// (Tail/Range by seq), deliveries newest-first with a limit, and the
// bindings list (the store returns all records) is cached for a short time
// and sorted and paged in memory; BenchmarkOverview100kBindings measures it.
package console
