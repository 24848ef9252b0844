// Package matrix is the Matrix adapter (issue 21) over maunium.net/go/mautrix, an unmodified MPL-2.0 dependency.
// It is the only package that imports mautrix. This is the groundwork: a client and sender (Client), its /sync loop
// (Sync), inbound classification and a text-command parser. It is not wired into cmd/bot or core yet; that waits for
// the house refactor (issue 18), which must provide what is listed under "Needs from core" below.
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
//
// Identifiers. Room ids (!opaque:server), event ids ($opaque, room v4+) and user ids (@local:server) contain ':'
// and '$'; they are used verbatim. A thread is its root event: the conversation id of a thread is the root's event
// id and its parent is the room id.
//
// Needs from core (the house refactor; see docs/DECISIONS.md, "Matrix adapter groundwork"):
//   - Platform-neutral command handling: the adapter parses "!spawn ..." into a Command (ParseCommand) and needs a
//     core entry point taking (conversation ref, invoking user, command name, sub-command, options) and returning
//     the reply text, the same for Discord's slash commands and Matrix's text commands.
//   - (Done: core/sessionkey, DECISIONS 79.) Session keys, targets (ParseTarget, scheduler.ParseTo) and
//     conversation refs carry the platform and accept ids with ':' and '$' ("matrix:!room:server", thread
//     "matrix:!room:server/$event", DM "matrix:@user:server").
//   - (Done: delivery.Mux, DECISIONS 80.) Outbound dispatches each Delivery to the sender of its Target's platform;
//     DeliverySender is Matrix's delivery.Sender over Client.Send (Resend and FirstAttempt map onto Message.Resend
//     and Message.Since; Persona onto Message.Persona; the thread onto Message.ThreadRoot) and its LiveSender
//     (PostLive posts one part with Send's transaction id and mark, EditLive edits with m.replace; DECISIONS 81).
//     What is left is wiring it in cmd/bot (NewMux over the Discord and Matrix senders).
//   - An inbound entry point taking a platform-neutral message (Inbound here), deduping by event id (the /sync
//     batch after a crash is handed again), and thread lifecycle events (a redacted thread root ends its binding).
//   - A config "matrix" section: homeserver URL, bot user id, access token (secret), device id, appservice
//     (as_token secret, ghost user prefix) and the sync token file path.
package matrix
