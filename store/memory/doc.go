// Package memory holds in-memory implementations of the core store
// interfaces: binding.Store, transcript.Store and delivery.Store, all on one
// Store value (see New).
//
// Invariants:
//   - Every method is safe for concurrent use; one mutex guards all state.
//   - Values are copied on the way in and on the way out: a caller mutating a
//     slice or map it passed in or got back never changes stored state.
//   - Transcript Append assigns Seq from 1, strictly increasing and dense per
//     session, and dedupes on a non-empty DeliveryID within the session in the
//     same critical section as the seq assignment.
//   - Stored values are normalised the way a JSON-backed store returns them:
//     Entry.MessageIDs is never nil ([]string{} when empty), empty maps are nil,
//     empty delivery message-id lists are nil, and monotonic clock readings
//     are stripped from times.
//
// The store is not durable; it exists for tests and the demo. It passes the
// same conformance suites (bindingtest, transcripttest, deliverytest) as
// store/bolt.
package memory
