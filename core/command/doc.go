// Package command is the platform-neutral logic of the chat commands of
// DESIGN.md §4 (/spawn, /focus, /unfocus, /agents, /session, /cron, /reset,
// /stop): what each does and how its answer reads. An adapter only parses
// its platform's command (Discord: an interaction's options; Matrix: a
// "!spawn ..." text) into an Invocation, calls Commands.Run, and answers
// with the Reply (ephemeral or public) or the error's text (usertext.ForChat).
//
// Texts that name the platform's syntax, settings or markup (a command as
// it is typed, a user mention, a link to a thread, the config key that
// enables thread bindings) come from the invocation's Platform, so each
// platform's users read their own words; Discord's read exactly as they did
// when the commands lived in adapter/discord.
//
// Invariants (tests in this package; the adapters' and cmd/bot's e2e tests
// for the wording end to end): who may do what is asked of the one
// authority rule (core/authz) or of the collaborator the model's tools go
// through too (Jobs, ACP), never decided here alone (invariant 13); an error
// Run returns is either user-facing (UserMessage, final text for the
// invocation's platform, scheduler hints rendered as its commands) or
// internal, which the boundary logs once and never shows.
package command
