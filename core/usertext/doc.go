// Package usertext holds what texts shown to people share across layers: a Hint names what would help the reader
// next as an action on jobs, never as a command, and each reader's boundary renders it in its own terms
// (HintText: a slash command on Discord, a text command on Matrix, a tool's name for the model). The scheduler
// writes hints; the command layer and the application render them; neither imports the other for it.
//
// Invariants:
//   - A Hint names no command; only a HintText does.
//   - A text whose hint its reader cannot name leaves the hint out (Render, Line): never a sentence with a hole.
package usertext
