// Package discord is the Discord adapter and the only package that imports
// discordgo. It is split one way, sharing one *discordgo.Session:
//
//   - Client is the REST side: core deliveries into Discord calls (the
//     delivery.Sender, delivery.LiveSender, session.Threads, Typist and
//     Fetcher implementations), webhooks, retries, idempotency, the token,
//     and the membership lookups behind the authority rule. It is built
//     first and works before the gateway connects.
//   - Gateway is the event side: the gateway connection and its shard,
//     inbound messages, thread state, edits and deletions, slash commands
//     and components, catch-up. It calls Discord through its Client, which
//     knows nothing of it. A slash command's logic and wording are the
//     core's (core/command): the Gateway parses the interaction into a
//     command.Invocation worded by CommandPlatform, and answers the Reply
//     (deferral within 3 s, ephemeral or public through Outbound).
//
// Wiring runs Client -> core/delivery.Outbound -> core/session ->
// core/command -> Gateway, each built once with everything it needs.
//
// Invariants:
//   - The bot's own messages and its own webhooks' posts are never routed
//     as inbound (no echo loops); other bots are ignored.
//   - Every send and edit carries allowed_mentions {"parse": []}; text over
//     2000 characters is split into parts that add up to the text.
//   - Bot sends carry a nonce derived from the delivery id with
//     enforce_nonce, so a retried send returns the first message; webhook
//     sends (no nonce) reconcile by reading the thread before a re-send.
//   - Only retryable failures (429, 5xx, network) are retried; permanent
//     ones map onto delivery.ErrDestinationGone / ErrForbidden /
//     ErrRejected. A bound thread that is archived, locked or deleted is
//     never posted to and never replaced by its parent channel; a plain bot
//     send replaces a webhook send only when the webhook itself is unusable.
//   - Thread deleted, archived or locked (from an event or the sweeper)
//     ends its binding without posting.
//   - Every handler runs under a recover; every REST call uses the newest
//     token (SetToken), so reused thread and webhook managers never use a
//     stale one, and a new token re-identifies the gateway (rotate.go);
//     discordgo's global endpoints are never changed.
//   - Public slash-command replies go through core/delivery.Outbound (they
//     are displayed, so they are transcript entries); ephemeral ones do not.
package discord
