// Package delivery owns every outbound message: where a task completion
// goes (Router) and the single send path (Outbound).
//
// Invariants:
//   - Router: destination choice is separate from content; a completion
//     bound to a thread is never silently re-routed to the parent channel;
//     every fallback carries a reason string.
//   - Outbound writes a transcript entry only after the Sender returned
//     message ids (Discord confirmed the send), exactly once per delivery
//     id, into the session the destination conversation routes to at that
//     moment (sessionkey.Route, invariant 10).
//   - A failed send writes nothing and returns *FailedError.
//   - A turn's own reply is not written by Outbound: the turn commits it
//     under the conversation lock (CommitFunc), so transcript order is
//     display order.
//   - A delivery is recorded as pending before it is sent; Recover finishes
//     pending and sent-but-unwritten deliveries after a restart without
//     duplicating entries.
//   - Rule 1 exceptions (destination bound to another agent, native-only
//     payload) send without writing and log a warning.
package delivery
