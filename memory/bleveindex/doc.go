// Package bleveindex is the recall index of a bbolt-backed bot: a bleve v2
// (scorch) index in a directory beside the store file.
//
// Invariants:
//   - A document is one displayed transcript entry (its latest text, for
//     the snippet); Recall checks every hit against the store before it
//     shows it.
//   - Apply returns after bleve persisted the batch (scorch's safe batches),
//     so a change marked done in the store's queue is on disk.
//   - A deleted document leaves the live set at once; its bytes stay in
//     its segment file until scorch merges that segment away (background).
//     Recall never shows it: every hit is checked against the store.
package bleveindex
