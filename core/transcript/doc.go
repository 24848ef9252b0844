// Package transcript keeps each session's model-visible history.
//
// Invariants:
//   - Transcripts are append-only: entries are never rewritten or removed,
//     so cached prompt prefixes stay valid. Reset starts a new generation;
//     older entries leave the model's History but stay in the record.
//   - Append is idempotent on a non-empty delivery id: the same id with the
//     same text returns the first entry; with other text it fails with
//     ErrDeliveryConflict.
//   - Sequence numbers are assigned by the Store, strictly increasing per
//     session.
//   - History(key, n) reads only the tail of the session.
//   - Only core/delivery.Outbound and a turn (for its own user and reply
//     entries) call Append.
package transcript
