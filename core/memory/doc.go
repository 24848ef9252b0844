// Package memory is recall: a full-text index over what the chats displayed,
// searched with the authority of the user a turn acts for.
//
// Invariants:
//   - The index is derived, never the truth. Every transcript change
//     (an appended entry, an edit or deletion record, an erasure) is
//     queued by the store in the same transaction that makes it (Feed);
//     the Indexer applies queued changes off the reply's hot path and
//     marks them done only after the index has them, so a crash loses no
//     update and a reply never waits for the index.
//   - A document is derived from the store's record as it is when the
//     change is applied (not from the change itself), so applying a change
//     twice, or changes of one entry in any order, gives the same index.
//   - Deleted text is never found: an erased entry's document is removed,
//     and Recall re-reads every hit from the transcript store and drops
//     one whose entry is erased (the crash window between an erasure and
//     its index update included).
//   - An edit re-indexes: a document carries the latest displayed text of
//     its entry.
//   - Generations do not matter here: what /reset hid from the model is
//     still displayed, so it is still found.
//   - Recall searches only conversations the acting user may view now
//     (the authority's view check per conversation; a DM only by its own
//     user; a job run acts for its creator, a subagent for its spawner):
//     the view is given to the index's search, which applies it before it
//     takes the limit, and Recall drops any hit outside it as an error.
//   - A subagent's or job run's session is its owner's (Owners: the
//     spawner, the job's creator); its displayed entries are also found by
//     whoever may view where they were displayed; its undisplayed ones
//     (index key with OwnedSuffix) by its owner alone.
//   - Embeddings (optional) never sit on the reply's path: the Indexer
//     queues each document it indexes for a vector in the same step, and
//     its own loop embeds the queue; a failing endpoint degrades recall to
//     keyword ranking, never fails it.
package memory
