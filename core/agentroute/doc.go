// Package agentroute decides which agent answers in a conversation
// (agents[].channels): a Table maps channel, category, server (Discord
// guild) and Matrix room ids to agents, and resolves a conversation by the
// ids its platform asserts about it, most specific first.
//
// Invariants:
//   - Ids come from the platform only: the conversation's own id and its
//     parent (a thread's channel, a Matrix thread's room) as the adapter put
//     them in the ConversationRef, and the channel's category and server as
//     the platform's Locator reports them (Discord: the gateway cache).
//     Nothing of a message's content is asked.
//   - The most specific claim wins: the conversation itself, then its parent
//     (a thread follows its parent), then the category, then the server;
//     otherwise the default agent (the first configured). A DM always goes to
//     the default agent.
//   - An id belongs to at most one agent: New refuses a table where two
//     agents claim the same id, naming both.
//   - Resolution does no I/O and takes no lock beyond the Locator's own
//     (the gateway cache): it runs once per message and once per delivery
//     (core/delivery.Outbound.SessionFor, invariant 10).
package agentroute
