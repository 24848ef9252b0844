// Package usertext is the boundary where errors and hints become text for people. ForChat turns the error a
// person's request ended in (a command on any platform) into what the chat shows: a user-facing message, or a
// generic text while the caller logs the wrapped error. A Hint names what would help the reader next as an action
// on jobs, never as a command, and each reader's boundary renders it in its own terms (HintText: a slash command
// on Discord, a text command on Matrix, a tool's name for the model). The scheduler writes hints; the command
// layer and the application render them; neither imports the other for it.
//
// Invariants:
//   - Only a UserFacing error's own message reaches a chat, redacted of secrets; any other error's text stays in
//     the log.
//   - A Hint names no command; only a HintText does. A text whose hint its reader cannot name leaves the hint out
//     (Render, Line): never a sentence with a hole.
package usertext
