// Package redact is the one place that removes secrets from text leaving the
// process (invariant 14): log lines, errors shown to users or stored in
// records, console pages and `inspect` output.
//
// Two kinds of rule apply, always both:
//
//   - Known values: a Redactor holds the secrets the process was configured
//     with (the bot token, model API keys, the console token, the store DSN's
//     password) and replaces every occurrence of each (and of its JSON-escaped
//     form) with "[redacted]". Values shorter than MinSecretLen are ignored:
//     they are placeholders, and replacing them would garble text.
//   - Shapes (String, used by Redactor too): secrets the process learns at run
//     time and cannot list in advance:
//   - a webhook or interaction URL keeps its id and loses its token:
//     /webhooks/{id}/{token}, /interactions/{id}/{token}/callback,
//     /webhooks/{app}/{token}/messages/@original;
//   - Discord bot tokens (id.timestamp.hmac) and interaction tokens
//     (they start with base64 "interaction:");
//   - "Bot <token>" and "Bearer <token>" credentials;
//   - the password of a URL's userinfo (postgres://user:pw@host) and of a
//     keyword DSN (password=pw);
//   - model API keys (sk-..., sk-ant-...).
//
// Error wraps an error so that its text is redacted while errors.Is and
// errors.As still see the original; Writer wraps an io.Writer (the log
// output) so that every line written through it is redacted.
package redact
