// Package lane is the one conversation lane every adapter hands its events
// to (and the session manager its turns): work is ordered per key (a
// conversation, a session), one key's tasks run one at a time in the order
// they were pushed, and different keys run in parallel, so one conversation
// stuck behind a slow send or a streaming reply never holds up another.
//
// Invariants:
//   - A key's tasks run in push order, never two at once; a key's goroutine
//     exists only while it has work (an idle conversation costs nothing).
//   - Queues are bounded: a key holds at most Options.Capacity waiting tasks;
//     Push past it returns ErrFull and runs nothing (the caller says what is lost).
//   - After Close, Push returns ErrClosed; what was accepted before still runs,
//     and Wait returns once it has (or when its ctx ends: shutdown is bounded).
//   - A panicking task is logged with its name and its key's later tasks still run.
package lane
