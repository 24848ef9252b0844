// Package bindingtest is the conformance suite for binding.Store, run by
// every implementation (store/memory, store/bolt, store/postgres).
//
// Invariants the suite checks:
//   - PutBindings inserts or replaces by ID; Bindings returns every record,
//     active and ended, each once, order unspecified.
//   - PutBindings is atomic: a call containing an invalid record (empty ID)
//     fails and stores none of its records. A call with no records is a no-op.
//   - Records round-trip: all fields, durations, zero EndedAt stays zero,
//     times are Equal to what was stored, empty Metadata is nil.
//   - The store keeps its own copies (mutating a Metadata map passed in or
//     returned does not change stored state).
//   - Concurrent PutBindings calls are all applied.
//   - With a reopen hook (durable stores), records survive close and reopen.
package bindingtest
