// Package audit checks the promise against the chat: it compares what a
// conversation's transcripts say the chat displays (the transcript fold)
// with what the platform displays now, message by message (DESIGN
// invariant 1, Rule 1). Compare is the one comparison: `bot audit`, the
// periodic audit, the console's conversation view and the tests' Rule 1
// postcondition all use it.
//
// Invariants:
//   - The audit only reads: the store and the platform's history. It never
//     writes a transcript or repairs one (catch-up and the gateway's change
//     events do that).
//   - What one audit costs is bounded: Options.Window newest entries per
//     session, Options.Messages messages read per conversation.
//   - A difference names the message id; its text is the chat's and the
//     transcript's own (an operator's view: the console and the CLI), never
//     a metric label (metrics count differences by kind).
//   - Which conversation displays an entry comes from the entry (meta
//     displayedIn, written from the platform's ids) or, for entries written
//     before they carried it, from the session key of the conversation's own
//     session; never from message content.
package audit
