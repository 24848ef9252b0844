// Package discordtest is an in-process loopback Discord emulator: REST under /api/v9 and a JSON
// websocket gateway on one 127.0.0.1 listener, faithful enough that the real
// github.com/bwmarrin/discordgo v0.29.0 Session talks to it unchanged. It is an ordinary package
// (not _test.go) so the adapter's end-to-end tests, randomized scenario tests and the `bot demo`
// command can all run the bot without a token.
//
// # Use
//
//	e := discordtest.NewTest(t, discordtest.Options{})   // or New(opts) + Start() + Close()
//	g := e.AddGuild("lab")
//	ch, _ := e.AddTextChannel(g.ID, "general")
//	alice, _ := e.AddMember(g.ID, "alice")
//	s, _ := e.NewSession()            // discordgo Session with e.HTTPClient(), token, intents
//	s.AddHandler(...)
//	_ = s.Open()                      // GET /gateway, HELLO, IDENTIFY, READY, GUILD_CREATE...
//	_ = e.WaitHeartbeats(ctx, 1)      // before s.Close(): see gotchas below
//	e.UserSay(ch.ID, alice.ID, "hi")  // MESSAGE_CREATE reaches the bot's handler
//	msgs, _ := e.WaitMessages(ctx, ch.ID, 2)
//
// A bot configured with an API base URL can use URL() instead of HTTPClient(); discordgo itself
// is pointed at the emulator only through Session.Client (Transport rewrites https://discord.com
// to the emulator). discordgo's package globals are never modified, so tests may run in parallel,
// each with its own Emulator.
//
// # Invariants
//
//   - One mutex guards the whole world (guilds, channels, threads, messages, webhooks, commands,
//     interactions, request log, rate-limit and fault state). A REST write and the gateway events
//     it causes are committed under that mutex, so every session sees events in commit order.
//   - Every successful write is echoed on the gateway as Discord does: MESSAGE_CREATE (with
//     webhook_id for webhook and interaction posts), MESSAGE_UPDATE, MESSAGE_DELETE, MESSAGE_DELETE_BULK, THREAD_CREATE,
//     THREAD_UPDATE (also for auto-unarchive on send), THREAD_DELETE, CHANNEL_DELETE,
//     THREAD_MEMBER_UPDATE, WEBHOOKS_UPDATE; user actions emit MESSAGE_CREATE / INTERACTION_CREATE.
//   - Gateway frames are written by one goroutine per connection from an unbounded queue; dispatch
//     never blocks on the network. Each session has its own sequence numbers and keeps every frame,
//     so RESUME after a drop replays exactly the frames after the client's seq, then RESUMED.
//   - Sessions identified without the MESSAGE_CONTENT intent receive guild messages with empty
//     content and embeds, except the bot's own and those mentioning the bot (DMs are never blanked).
//   - IDs are snowflakes from the injectable clock, strictly increasing across all objects.
//   - Discord's rules are enforced with Discord's codes and statuses: 10003/10008/10015/10062
//     (404), 50001/50013 (403, from per-channel bot deny overwrites, inherited by threads), 50006
//     and 50035 (400, empty / over 2000 characters / bad fields), 50083 (400, edit or delete in an
//     archived thread), 160005 (403, send to a locked thread; the bot is not a moderator), 30007
//     (15 webhooks per channel), 50027 (401, wrong webhook token), 40060 (interaction already
//     acknowledged). A send into an archived, unlocked thread unarchives it. nonce+enforce_nonce
//     returns the first message for a repeated nonce in the channel, within Options.NonceWindow
//     (default 5 minutes) only: later the same nonce posts a new message.
//   - Interactions keep Discord's clocks (injectable): a callback later than 3 s after the
//     interaction was created fails 404 / 10062; followups and @original reads, edits and deletes
//     work for 15 minutes, then fail 401 / 50027.
//   - The application (GET /applications/@me, READY) has flags, DefaultApplicationFlags unless
//     Options.ApplicationFlags or SetApplicationFlags say otherwise; IDENTIFY asking for a
//     privileged intent (members, presences, message content) they do not allow is closed with
//     4014. GET /users/@me/guilds pages the bot's guilds with its guild-wide permissions.
//   - Typing (POST /channels/{id}/typing) is always limited per channel (TypingLimit: 5 per 5 s) unless
//     configured otherwise; RequestsTo("POST", that route) lists the bot's typing calls. Message
//     edits (PATCH /channels/{id}/messages/{id}) are always limited per channel (EditLimit: 5 per
//     5 s, all of the channel's messages together) unless configured otherwise.
//   - Message components: create and edit bodies may carry action rows of buttons (validated:
//     at most 5 rows of 5 buttons, custom_id 1-100 characters, unique in the message, label at
//     most 80); an edit's components replace them ([] removes them). ClickButton has a user click
//     a button: INTERACTION_CREATE type 3 with the message, under the same 3 s deadline.
//   - Other rate limits are off unless configured (Options.RateLimits, GlobalLimit, SetRateLimit); when
//     on, buckets are per method+route per top-level resource, every response carries X-RateLimit-*
//     headers, and 429s carry retry_after (seconds), Retry-After and X-RateLimit-Scope.
//   - Every /api request is checked against Discord's OpenAPI description (embedded from
//     openapi/); Violations lists unknown routes, methods, query names, top-level body properties,
//     and routes the emulator does not implement. NewTest fails the test on any.
//
// # Gotchas (discordgo v0.29.0)
//
//   - Set Session fields (ShouldReconnectOnError, Identify, Client) before Open, never after.
//   - Wait for the first heartbeat (WaitHeartbeats) before Session.Close, or discordgo's heartbeat
//     goroutine may fail and reconnect after Close.
//   - Session.Close sleeps 1 s; a reconnect costs at least that much.
//   - discordgo retries 429s forever by default; use discordgo.WithRetryOnRatelimit(false) to see
//     *discordgo.RateLimitError.
package discordtest
