// Package acp binds a Discord conversation to an external coding agent that
// speaks the Agent Client Protocol (JSON-RPC over stdio: initialize,
// session/new, session/load, session/prompt, session/update,
// session/request_permission, session/cancel).
//
// Invariants:
//   - One agent process per active session, supervised: a bounded shutdown
//     (stdin closed, then SIGTERM to its group after a grace period, then SIGKILL
//     of its process group), restart with backoff, and a crash ends the
//     running turn with a notice in the thread. Its process group has a
//     parent-death signal (Linux), is recorded (Deps.Procs) for the next
//     start to kill if the bot dies, and is killed whole when it stops.
//   - A graceful stop mid-turn ends the turn with an "interrupted" line.
//   - The agent gets an explicit environment only (the configured env, PATH
//     and a HOME of its own): never the bot's token or other secrets.
//   - The client capabilities fs/read_text_file and fs/write_text_file are
//     served inside the session's workspace directory only: paths outside
//     it, ".." elements and symlinks leading out are refused, and the file
//     is opened one component at a time with O_NOFOLLOW (openBeneath), so
//     a symlink swapped in after the check is not followed. A read is capped
//     at MaxReadBytes (regular files only).
//   - The terminal capability is on only with AgentConfig.Terminal. Each
//     command runs under a PTY in a session (process group) of its own, in
//     the workspace, with the agent's environment only; its group is
//     recorded (Deps.Procs) and killed on kill, release, the timeout, the
//     end of its turn or session and shutdown; what is left of the group
//     when its leader exits is SIGKILLed. The output kept is capped
//     (outputByteLimit, else DefaultOutputCap) at a character boundary.
//   - With CommandOptions.Approve a command starts only after an Allow click
//     by the binder or someone MayUseAgent admits; anything else (Deny, the
//     timeout, a cancelled turn, a restart) means it never runs.
//   - With a Sandbox the agent process and its commands run under bwrap
//     (see Sandbox); commands get no network unless Sandbox.Network; with
//     Sandbox.Relay the agent has none either, but CONNECT to its model
//     endpoints through the relay and the bot's endpoint proxy.
//   - A session's directories are one safe component made from the
//     conversation id (safeComponent), never the id itself (invariant 18).
//   - What the thread displays is the bound session's transcript (Rule 1):
//     each of a turn's messages (answer text, tool call and plan status
//     lines, permission requests with their buttons) is a core/delivery
//     live message: posted with its buttons, edited paced while the turn
//     runs, its text in the outbox before every request; when the turn
//     ends each is finished in display order and its entry written once
//     with its final displayed text and ids, into the session that owned
//     the turn when it started (a /focus mid-turn moves what follows, not
//     the turn). The turn holds the thread's send lock (Outbound.Hold)
//     from its first post until its last entry is written: another bot
//     message there (a notice, the new session's after a /focus) comes
//     after the turn's messages, on the screen and in the transcript.
//     After a bot crash mid-turn, Outbound.Recover finishes and records
//     every message the turn had shown.
//   - Only the binder or an operator answers a permission request; no answer
//     within the timeout is a reject.
package acp
