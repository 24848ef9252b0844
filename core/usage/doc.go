// Package usage is model usage accounting and budgets: one Record per
// model call (tokens as the provider reported them, the model, agent,
// acting user, server or room, conversation and run), its cost from the
// model's price, summaries for /usage, `bot inspect usage` and the console,
// and the budget check before a turn, job run or subagent.
//
// Invariants:
//   - Records come only from model calls' reported usage; a call that
//     reported nothing records zero tokens, never an estimate.
//   - Cost is tokens x price per million, fixed when the record is written
//     (a later price change does not rewrite history).
//   - Budgets are read from the store (durable across restarts, shared by
//     every process on one PostgreSQL store), over a sliding window.
//   - Over a budget, the first refused piece of work per user gets one
//     notice; later ones are refused silently until usage falls below it.
//   - The store keeps records for a retention period (like delivery
//     records) and Prune removes older ones.
//   - A turn's records are written with its reply entry, in the entry's
//     store transaction (transcript.Entry.Calls): no write of their own
//     on the reply path; records no entry carried are written together
//     at the work's end.
//   - Every Store implementation passes usagetest.Run.
package usage
