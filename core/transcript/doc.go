// Package transcript keeps each session's model-visible history.
//
// Invariants:
//   - Transcripts are append-only: entries are never rewritten or removed,
//     so cached prompt prefixes stay valid. Reset starts a new generation;
//     older entries leave the model's History but stay in the record. The
//     one exception (invariant 17): Delete erases a deleted message's text
//     (the entry stays, marked Deleted).
//   - The chat can change under us: Edit and Delete append edit and
//     deletion records (Source edit/deletion, Target = the entry's seq),
//     keyed by the message id so a replayed event is written once; History
//     applies them and never returns them.
//   - Append is idempotent on a non-empty delivery id: the same id with the
//     same text returns the first entry; with other text it fails with
//     ErrDeliveryConflict.
//   - Sequence numbers are assigned by the Store, strictly increasing per
//     session.
//   - History(key, n) reads only the tail of the session.
//   - Only core/delivery.Outbound and a turn (for its own user and reply
//     entries) call Append; change records are written by this package's
//     own Edit, Delete and DeleteDisplayed (docs/DECISIONS.md).
package transcript
