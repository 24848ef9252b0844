// Package deliverytest is the conformance suite for delivery.Store (the
// outbox), run by every implementation (store/memory, store/bolt, later
// store/postgres).
//
// Invariants the suite checks:
//   - PutDelivery inserts or replaces by Delivery.ID; an empty ID is an error.
//   - GetDelivery returns the stored record, or found=false and no error.
//   - Deliveries(state, limit) returns the records in that state ("" = all),
//     newest CreatedAt first, at most limit (0 = no limit); replacing a record
//     (new state, new CreatedAt) moves it, and it is never listed twice.
//   - Records round-trip: all fields, times Equal, empty MessageIDs and empty
//     Producer.Meta come back nil.
//   - The store keeps its own copies.
//   - Concurrent PutDelivery calls are all applied.
//   - With a reopen hook (durable stores), records and their listing order
//     survive close and reopen.
package deliverytest
