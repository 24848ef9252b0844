// Package matrix is the Matrix adapter (issue 21) over maunium.net/go/mautrix, an unmodified MPL-2.0 dependency.
// It is the only package that imports mautrix. Pieces: a client and sender (Client, DeliverySender), its /sync loop
// (Sync), inbound classification (Classifier) and a text-command parser (ParseCommand); for the core: Directory
// (core/authz.Directory), Threads (core/session.Threads), Typist (core/session.Typist) and Gateway (the Sync loop's
// Handler, turning events into core calls). It is not wired into cmd/bot yet (see "Needs from core" below).
//
// Invariants:
//   - The /sync token is saved (TokenStore) only after every event of its batch was handed to the Handler, and a
//     batch being handled is finished even when the context is cancelled: a clean stop and restart resumes after
//     the last handled batch, with no event handled twice and none lost. A crash between the Handler and the save
//     hands that one batch again (at-least-once): the consumer dedupes by event id. The very first start (no
//     token) skips the room history and handles only what arrives afterwards (and pending invites). A timeline
//     truncated by the homeserver (more events since the token than one /sync holds) is filled in from
//     /messages between the token and the timeline, oldest first, up to SyncOptions.MaxCatchUp events per room.
//   - The bot's own events and every appservice ghost's events (personas) are never handed on as inbound (no echo
//     loops); neither are m.notice messages (the Matrix convention for bot output).
//   - A mention is the bot's user id in m.mentions.user_ids. The body is consulted only when an event has no
//     m.mentions at all (clients older than intentional mentions); "@room" never counts as a mention of the bot.
//   - Every send and edit carries "m.mentions": {} and has "@room" defused in its body (a word joiner after "@"):
//     Dendrite applies the legacy @room push rule even with empty m.mentions.
//   - A send carries the delivery id twice: in its transaction id (agentbot.<id>.<part>; the homeserver dedupes a
//     retry within its own lifetime) and in the content (DeliveryKey), so Send with Resend finds the parts an
//     earlier attempt posted (by scanning the room's recent messages) and posts only the rest: Dendrite forgets
//     transaction ids when it restarts.
//   - A Matrix event may be at most 65,536 bytes as JSON, envelope included: text is split at clean cuts
//     (paragraph, line, space, else a character boundary) into parts whose content JSON is at most
//     MaxContentBytes; the parts add up to the text. An edit (m.replace, for streaming) carries the new text whole
//     and a shortened fallback body; a new text that cannot fit one event is refused (ErrRejected), never cut.
//   - The only mautrix importer is this package (internal/arch); core never depends on it.
//   - A destination that cannot take messages any more (403 from the homeserver: power-level lock, kicked, banned;
//     404: unknown room; a thread root that is redacted or gone) yields an error wrapping ErrDestinationGone, which
//     wraps core/delivery.ErrDestinationGone, so the core's "destination gone" path recognises it unchanged. A
//     thread whose root is gone is never replaced by its room.
//   - Permissions (Directory) are read from the room's state at each question, never cached: view = joined, send =
//     joined with the power level m.room.message needs, operator-like (ManageGuild) = the power level that changes
//     m.room.power_levels. A room the bot is not joined to does not exist for the authority; a failed read is an
//     error (the authority refuses: fail closed). A thread is its room while its root stands.
//   - A thread root is posted through Outbound (Threads), so the room's transcript holds it (Rule 1); one
//     CreateThread call makes at most one root however its attempts fail (each retry is a resend that looks first;
//     no blind retry of a transaction id), and two calls make two threads.
//   - The bot's typing notice (Typist) is cleared by its next post into the room, as Discord's bot message does.
//   - Inbound (Gateway): a message reaches the core in a DM, a bound conversation, or when it mentions the bot, with
//     its text as displayed; a text command's reply goes through Outbound as "cmd:<event id>" and a command whose
//     reply was delivered is not run again; the session manager dedupes messages by event id, so an event handed
//     again after a crash starts no second turn; an edit counts only by the original's sender; a redacted bound
//     thread root ends its binding; redactions are recorded as deletions.
//   - A DM is its user ("user:@alice:server"); its rooms are the bot's m.direct, kept by the adapter from invites
//     marked is_direct; the bot opens no DM on its own.
//
// Identifiers. Room ids (!opaque:server), event ids ($opaque, room v4+) and user ids (@local:server) contain ':'
// and '$'; they are used verbatim. A thread is its root event: the conversation id of a thread is the root's event
// id and its parent is the room id.
//
// Wiring (bot, the config's matrix section): the Client is Outbound's sender for "matrix" targets, the Directory
// the authority's for Matrix conversations, Threads and Typist the sessions' for Matrix, all through the one
// platform table (core/platform; DECISIONS 80, 81), the core's commands
// answer its text commands (core/command with CommandPlatform), and the Sync loop feeds the Gateway. Keys and
// targets carry the platform and Matrix ids verbatim (core/sessionkey; DECISIONS 79). Not yet: an access policy
// like discord.access, media, and catching up edits and redactions made while the bot was down beyond what /sync
// replays.
package matrix
