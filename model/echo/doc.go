// Package echo is the default model provider: deterministic, no network, no
// key. It lets tests and `bot demo` exercise turns, tools, subagents and
// provider errors.
//
// Grammar. The "last user text" is the Text of the last message with role
// user. Rules are tried in this order; the first that applies answers:
//
//  1. Failure: if the last message is a user message and one of its lines is
//     "!fail <kind>" (kind: auth, rate-limit, server, timeout, bad-request,
//     canceled, unknown), Complete returns a *model.Error of that kind with
//     Provider "echo" and the matching HTTP status (401, 429, 500, 0, 400, 0,
//     0).
//  2. Tool calls: if the last message is a user message and it has lines
//     "!tool <name> [<json-object-args>]" (args default to {}), the response
//     has one ToolCall per such line, in order, with IDs "call_<n>" where n
//     continues after the number of tool calls already in the request
//     history (call_1, call_2, ... in a fresh session), and Text "". Invalid
//     JSON args give a bad-request error.
//  3. Tool results: if the last message is a tool message, the response
//     summarises the trailing run of tool messages:
//     "tool results:\n- <name>: <text>" per result, in order (<name> is the
//     called tool's name, or the call id if the call is not in the history).
//  4. Subagent task: if the last user text starts with "Task:", the answer
//     is "Done: <rest of that text, trimmed>". Otherwise, if the System
//     prompt has a line starting with "Task:", the answer is
//     "Done: <rest of that line, trimmed>".
//  5. Echo: "echo: <last user text>", or "echo: (no user message)".
//
// Stream answers exactly as Complete, handing the text to its callback a
// word at a time (Pieces).
//
// Invariants: the request is never modified; the same request always gives
// the same response; MaxTokens and Tools are ignored (a "!tool" line may name
// any tool, so tests can also exercise unknown-tool handling).
package echo
