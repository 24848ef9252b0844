// Package authz is the bot's one authority rule (DESIGN.md invariant 13):
// who is an operator, which conversations a user may read or post into, and
// which sessions a user may /focus. Slash commands and the model's tools ask
// the same Authority, so a tool can never do what the equivalent command
// would refuse. The chat platform's facts (member roles, channel permissions
// computed from roles and overwrites) come from a Directory that the
// platform adapter implements; this package knows no platform.
//
// Invariants (tests in this package, adapter/discord and cmd/bot's
// TestAuthzE2E*): a refusal is an error of type *Refusal whose text says
// why; a failed lookup refuses (fail closed); an Actor without a user has
// no authority; a DM is visible only to its own user; the Limiter counts on
// the injected clock and notifies once per exhaustion.
package authz
