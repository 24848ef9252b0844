// Package bleveindex is the recall index of a bbolt-backed bot: a bleve v2
// (scorch) index in a directory beside the store file.
//
// Invariants:
//   - A document is one displayed transcript entry (its latest text, for
//     the snippet); Recall checks every hit against the store before it
//     shows it.
//   - Apply returns after bleve persisted the batch (scorch's safe batches),
//     so a change marked done in the store's queue is on disk.
//   - A batch that deletes documents is followed by a merge of the
//     segments (ForceMerge), so a deleted message's words leave the term
//     dictionaries on disk too, not only the live document set.
package bleveindex
