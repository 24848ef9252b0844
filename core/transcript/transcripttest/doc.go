// Package transcripttest is the conformance suite for transcript.Store.
// Every implementation (store/memory, store/bolt, store/postgres) runs
// Run from its own tests, so all of them share one definition of the
// semantics the core relies on.
//
// Invariants the suite checks:
//   - Append assigns Seq from 1, strictly increasing and dense per session;
//     sessions are independent; any Seq or SessionKey on the input is
//     replaced (SessionKey becomes the key appended to).
//   - A non-empty DeliveryID already present in the session makes Append
//     return the existing entry with existed=true and write nothing (the next
//     append gets the next dense seq). An empty DeliveryID never dedupes. The
//     same DeliveryID in another session is a different entry.
//   - Idempotency and seq assignment are atomic: concurrent appenders racing on
//     the same delivery ids produce unique dense seqs and each id exactly once.
//   - Tail(n) returns min(n, size) newest entries oldest first; n <= 0 and an
//     unknown session return an empty result and no error.
//   - Range(from, limit) returns entries with Seq >= from oldest first, at most
//     limit (limit <= 0: no limit); pagination by last seq + 1 visits every
//     entry once; an unknown session is empty, not an error.
//   - ByMessageID finds an entry by any of its message ids, only within the
//     given session.
//   - Generation is 0 for an unknown session; SetGeneration persists.
//   - Sessions lists every key that has entries.
//   - Entries round-trip: MessageIDs is never nil ([]string{} when the entry
//     had none), empty Meta is nil, times are Equal to what was stored.
//   - The store keeps its own copies: mutating slices or maps passed in or
//     returned does not change stored entries.
//   - With a reopen hook (durable stores), everything above survives a
//     close and reopen, and seq assignment and dedupe continue from the
//     stored state.
package transcripttest
