// Package notes is memory's notes: what the model was asked to remember,
// kept as messages people can read and delete.
//
// Invariants (tests in this package, notestest and bot's e2e tests):
//   - A note is a bot message: remember posts "📝 Noted (<scope>): <text>"
//     through the one send owner (delivery.Outbound) into the conversation
//     the turn runs in, so it is displayed and in that conversation's
//     transcript (Rule 1). Its record (Note) is written only after the
//     platform confirmed the message and names its message ids.
//   - A note lives as long as its message: the message's deletion (by
//     anyone, through the transcript's deletion path: Service.EraseEntry is
//     a transcript.Eraser) forgets the note; forget deletes the message on
//     the platform and then runs that same deletion path.
//   - Scopes: a `me` note is given to the model in the turns its user
//     starts, a `here` note in its conversation's turns, a `server` note in
//     the turns of every conversation of its server (Discord guild, Matrix
//     room). A DM has no server. Only an operator of the server writes a
//     server note.
//   - Who may forget: the note's author, the user it is about, or an
//     operator of the server its message is displayed in (invariant 13:
//     power has a scope); a note displayed in a DM belongs to that DM's
//     user alone. A refusal does not tell whether the note exists.
//   - Notes are given to the model at the start of each turn up to a byte
//     budget (newest first, whole notes only); the rest are found by
//     recall (their messages are transcript entries).
//   - Turning notes off (memory.notes or memory.enabled false, SIGHUP)
//     withdraws remember and forget and stops giving notes to turns that
//     start after it.
package notes
