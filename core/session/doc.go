// Package session runs agent sessions: turns, subagents and job turns.
//
// Invariants:
//   - One dispatch step per inbound message (HandleMessage, for the live
//     lane, the catch-up and Resume alike): the conversation is resolved
//     once to its target (a session, or an external agent's session through
//     External) and the message is taken once, for that target; a message
//     a transcript already holds is taken, whoever wrote its entry.
//   - One turn at a time per session: work for a session key runs in a
//     per-key queue, in arrival order (messages arriving during a turn
//     queue behind it).
//   - A turn writes exactly its own entries: the user message (at arrival,
//     under the conversation's send lock, so transcript order is display
//     order) and its reply or notice after Discord confirmed it. Every
//     other entry (intros, announces, notices, message-tool sends to other
//     chats, farewells) goes through core/delivery.Outbound.
//   - Tool calls and their results are not displayed, so they live only in
//     the request of the turn that made them, never in a transcript.
//   - A subagent's completion goes where the router says (fail-closed): a
//     bound thread, or for a subagent never bound the requester
//     conversation. A subagent that was bound but whose thread cannot take
//     the result posts it nowhere; its result stays in the registry and the
//     requester gets a notice without the result.
//   - Provider errors become a short visible notice; they never leave a
//     session stuck.
//   - A streamed reply (Agent.Stream with a model.Streamer, posted as the
//     bot) goes through Outbound.Live: only answer text is shown, never a
//     tool call; a round that ends in tool calls closes its message with the
//     complete text it showed (delivery "<turn>#<n>") before any tool runs;
//     a stop keeps exactly what is displayed (Live.Shown); a model error
//     ends the message with the notice after what was shown. Each message's
//     entry is written once, when it is finished.
package session
