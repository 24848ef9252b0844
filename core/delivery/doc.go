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
//   - One process may post to several platforms: a Dispatcher (the
//     platform table, core/platform) sends each delivery with the sender of
//     its Target.Channel; a platform without one is a
//     permanent failure (ErrUnknownPlatform, wrapping ErrRejected), never a
//     silent drop.
//   - A turn's own reply is not written by Outbound: the turn commits it
//     under the conversation lock (CommitFunc), so transcript order is
//     display order.
//   - A delivery is recorded as pending before it is sent; Recover finishes
//     pending and sent-but-unwritten deliveries after a restart without
//     duplicating entries.
//   - Rule 1 exceptions (destination bound to another agent, native-only
//     payload) send without writing and log a warning.
//
// # Live messages
//
// A message whose text grows while it is displayed (a streamed model
// reply; an ACP agent's output) is a Live, also owned by Outbound:
//
//	l := out.Live(ctx, d, delivery.LiveOptions{Controls: delivery.Controls{StopRun: runID}, Commit: commit})
//	l.Update(textSoFar) // any number of times; never blocks on I/O
//	res, err := l.Finish(ctx, finalText) // or l.FinishShown(ctx) after a stop
//
// The Sender must also be a LiveSender (post a part, edit a part, split
// text; the Discord adapter is), or a Dispatcher (core/platform's table) whose sender for the
// destination is one: Outbound asks a Dispatcher for the destination's own
// sender, so each platform's limit cuts its messages; LiveTo says whether a
// destination can show live messages at all. Invariants:
//   - Nothing is sent before the first non-blank text; then the first part
//     is posted at once, and each message gets at most one request per
//     LiveOptions.Interval (default 1 s), always with the latest text;
//     live messages sharing a Pacer get at most one edit per Interval
//     among them all.
//   - Past the sender's length limit the text continues in a new message
//     at a clean cut (SplitLive); a cut part never changes again.
//   - Controls (the Stop button, other buttons such as an ACP agent's
//     permission options) are sent with the post of the growing part and
//     only on it; SetControls changes them (paced like an edit); Finish's
//     final edit removes them.
//   - The transcript entry is written once, by Finish, after the last
//     request is confirmed: exactly the parts displayed, every message id
//     (through Commit for a turn's reply). A refused request keeps what is
//     shown and records that; an unknown outcome leaves the record pending.
//   - From its first post until Finish returns, a Live holds its
//     conversation's send lock: other sends (and user entries) there wait,
//     so transcript order is display order. Code that must act mid-stream
//     (a cancel) must not wait for that lock first. With
//     LiveOptions.NoSendLock (an ACP turn: several live messages at once)
//     the caller holds the lock for all of them (Outbound.Hold, from the
//     first post until the last entry is written) and orders them: Posted
//     before it starts the next one, Finish in display order. A recovery
//     pass leaves a held conversation's unfinished deliveries to a later
//     pass rather than wait for its owner, and WithConversation (a user
//     entry, a deletion's barrier) and EraseEntry do not wait for it
//     either.
//   - A delivery whose Producer.Session is set writes its entry into that
//     session, wherever the conversation routes when it is confirmed (an
//     ACP turn's messages: the session that owned the turn).
//   - Before every post or edit the outbox record holds the text each part
//     is about to show (Record.LiveParts) and the ids already posted; after
//     a post, the new id. Recover finishes a live delivery a crash left:
//     it re-posts a part with no recorded id under the same idempotency key
//     (never a duplicate), edits each part to its recorded text plus
//     InterruptedMark without controls, then writes the entry.
//   - Files (Delivery.Files, a live delivery only) go with the first
//     part's post, through the sender's FilePoster under that part's
//     idempotency key: one message, one delivery id. Their bytes are in
//     the outbox record from the first attempt (redacted like the text),
//     so a re-post sends the same files; the files as the platform shows
//     them (URLs) are recorded with the message id, and the entry lists
//     them as its attachments. Deliver refuses files.
package delivery
