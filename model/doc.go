// Package model is the provider-neutral model API: a Request (system prompt,
// messages, tools) goes to a Provider, which returns text and/or tool calls.
//
// Invariants:
//   - A Request's Messages are the session transcript exactly as it happened.
//     They may hold adjacent messages of the same role (a job result posted
//     after a reply, two users speaking in a row), tool results whose call
//     is missing from a truncated history, or an assistant message first.
//   - Providers never modify the caller's messages. Each provider family's
//     request builder (package openai, package anthropic) makes the history
//     valid for its API in a copy: merging adjacent same-role messages with
//     MergeSeparator, pairing tool results with their calls, adding a
//     placeholder first user turn where the API needs one. The stored
//     transcript is never rewritten; merging happens only in the request
//     builder (DESIGN.md §3 invariant 11).
//   - Provider failures are *Error values with a Kind; errors.Is works with
//     the sentinels ErrAuth, ErrRateLimited, ErrServer, ErrTimeout,
//     ErrBadRequest and ErrCanceled. An *Error's UserMessage (shown through
//     core/usertext, the one chat boundary) is a short notice that never
//     contains credentials; Classified reads any error as one of its kind.
//
// Constructing a provider from configuration lives in package
// model/providers (it imports the provider packages, which import this one).
package model
