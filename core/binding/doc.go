// Package binding binds conversations (a Discord thread, a channel, a DM) to
// agent sessions, independently of the chat platform.
//
// Invariants:
//   - A conversation has at most one active binding; binding it to another
//     session ends the old one with reason "rebound".
//   - Conversation refs are normalised (Normalize) before they are stored or
//     matched.
//   - An expired binding (idle window from the last activity, max age from
//     bind time; 0 disables each) is absent on every read, and Sweep ends it
//     with reason "idle-expired" or "max-age-expired".
//   - ResolveByConversation reads only the in-memory index and does not
//     allocate; the Store is the truth after a restart (Load rebuilds the
//     index), and Touch is persisted by Flush, which Run also calls on stop.
//   - Ended bindings are kept with EndedAt and EndedReason, never deleted.
//   - The package imports neither discordgo nor bbolt; Store speaks records.
package binding
