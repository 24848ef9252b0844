// Package vecfile keeps recall's embedding vectors in a bbolt file beside
// the keyword index (memory.Vectors): one unit vector per document, keyed
// by session key and seq, and a queue of documents waiting for one.
//
// Invariants:
//   - A vector is kept only for a document's current text: a put of other
//     text drops it and queues the document; a delete drops vector and
//     queued text (deleted text is not kept here either).
//   - Nearest is exact: cosine similarity (a dot product of unit vectors)
//     over every vector of the keys searched, so the view is applied
//     before the limit.
package vecfile
