package acp

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agentbot/agentbot/core/authz"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
)

// approveCommand asks in the running turn whether a command may run: a
// message with the command line and its directory, Allow and Deny
// buttons for the binder, the agent's own users/roles and the configured
// operator users (Manager.Choose); the choice is added to the message. No
// answer within the permission timeout, a cancelled turn or no turn at
// all is a refusal.
func (s *session) approveCommand(ctx context.Context, line, cwd string) error {
	s.mu.Lock()
	t := s.turn
	s.mu.Unlock()
	if t == nil {
		return fmt.Errorf("no turn is running to ask in: %w", ErrCommandRefused)
	}
	title := fmt.Sprintf("run %s in %s", codeSpan(line, 1200), codeSpan(s.shownDir(cwd), 300))
	resp, err := t.permission(ctx, sdk.RequestPermissionRequest{SessionId: sdk.SessionId(s.sessionID()),
		ToolCall: sdk.ToolCallUpdate{ToolCallId: sdk.ToolCallId("cmd-" + newID()), Title: &title},
		Options: []sdk.PermissionOption{
			{OptionId: "allow", Name: "Allow", Kind: sdk.PermissionOptionKindAllowOnce},
			{OptionId: "deny", Name: "Deny", Kind: sdk.PermissionOptionKindRejectOnce},
		}})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCommandRefused, err)
	}
	if resp.Outcome.Selected != nil && resp.Outcome.Selected.OptionId == "allow" {
		return nil
	}
	return ErrCommandRefused
}

// shownDir is a command's directory as the thread shows it: relative to
// the workspace ("." for its root), never the host's path.
func (s *session) shownDir(cwd string) string {
	s.mu.Lock()
	c := s.conn
	s.mu.Unlock()
	if c == nil || c.term == nil {
		return filepath.Base(cwd)
	}
	rel, err := filepath.Rel(c.term.ws.Root(), cwd)
	if err != nil {
		return filepath.Base(cwd)
	}
	return rel
}

// commandChanged shows a command in the running turn: one live message,
// edited at the channel's pace as output arrives and when it ends.
func (s *session) commandChanged(c *command) {
	s.mu.Lock()
	t := s.turn
	s.mu.Unlock()
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	if t.cmds == nil {
		t.cmds = map[string]*shownCmd{}
	}
	sc := t.cmds[c.ID]
	ended, _, _, _ := c.state()
	if sc == nil && ended {
		return // its turn is over (a later turn does not show it)
	}
	if sc == nil {
		t.text = nil
		// A Kill button while it runs (Manager.Choose: whoever may approve).
		kill := []delivery.Button{{CustomID: killPrefix + c.ID, Label: "Kill", Style: delivery.ButtonDanger, Optional: true}}
		sc = &shownCmd{c: c, lm: t.newMsg("", kill), dir: s.shownDir(c.Cwd)}
		t.cmds[c.ID] = sc
	}
	sc.lm.text = renderCommand(c, sc.dir, s.ac.Commands.Timeout)
	if ended {
		sc.endControls()
	}
	t.show(s.m.runCtx(), sc.lm)
	if ended {
		t.attachOutput(s.m.runCtx(), sc)
	}
}

// endControls takes the Kill button off an ended command's message.
func (sc *shownCmd) endControls() {
	if sc.lm.buttons == nil {
		return
	}
	sc.lm.buttons = nil
	if sc.lm.live != nil {
		sc.lm.live.SetControls(delivery.Controls{})
	}
}

// killPrefix starts a command's Kill button id ("acp:kill:<terminal id>").
const killPrefix = "acp:kill:"

// kill is a Kill button's click: the command's session's binder, or
// whoever may approve its commands, ends it. refusal as for Choose.
func (m *Manager) kill(ctx context.Context, id, userID string, where binding.ConversationRef) (refusal string) {
	s, c := m.findCommand(id)
	if c == nil {
		return "This command is no longer running."
	}
	if userID != s.rec.BoundBy && m.d.Authority.MayUseAgent(ctx, authz.Actor{UserID: userID, Where: where}, s.ac.Users, s.ac.Roles, "kill its commands") != nil {
		return fmt.Sprintf("Only <@%s>, who started this agent, the bot's configured operators or the users its configuration lists can kill its commands.", s.rec.BoundBy)
	}
	s.mu.Lock()
	conn := s.conn
	s.mu.Unlock()
	if conn != nil && conn.term != nil {
		conn.term.kill(c, "killed")
	}
	return ""
}

// findCommand finds a running command by terminal id.
func (m *Manager) findCommand(id string) (*session, *command) {
	m.mu.Lock()
	ss := make([]*session, 0, len(m.sessions))
	for _, s := range m.sessions {
		ss = append(ss, s)
	}
	m.mu.Unlock()
	for _, s := range ss {
		s.mu.Lock()
		conn := s.conn
		s.mu.Unlock()
		if conn == nil || conn.term == nil {
			continue
		}
		for _, c := range conn.term.running() {
			if c.ID == id {
				return s, c
			}
		}
	}
	return nil, nil
}

// Processes is /ps in a thread bound to an ACP session: its running
// commands with their elapsed time (each one's message in the thread has
// its Kill button).
func (m *Manager) Processes(ctx context.Context, rec binding.Record) (string, error) {
	s, err := m.sessionFor(rec)
	if err != nil {
		return "", err
	}
	if !s.ac.Terminal {
		return fmt.Sprintf("ℹ️ **%s** runs no commands here (its terminal is off).", s.ac.Name), nil
	}
	s.mu.Lock()
	conn := s.conn
	s.mu.Unlock()
	var cs []*command
	if conn != nil && conn.term != nil {
		cs = conn.term.running()
	}
	if len(cs) == 0 {
		return fmt.Sprintf("ℹ️ **%s** is running no command here.", s.ac.Name), nil
	}
	now := m.d.Clock.Now()
	var b strings.Builder
	fmt.Fprintf(&b, "**%s** is running %d command(s) here (each one's message has a Kill button):", s.ac.Name, len(cs))
	for _, c := range cs {
		fmt.Fprintf(&b, "\n• %s in %s · %s", codeSpan(c.Line, 200), codeSpan(s.shownDir(c.Cwd), 100), now.Sub(c.Started).Round(time.Second))
	}
	return truncate(b.String(), maxMessage), nil
}

// shownCmd is a command and its message in a turn.
type shownCmd struct {
	c   *command
	lm  *liveMsg
	dir string
	// attached: its end was handled by attachOutput (a file message
	// posted, or none needed).
	attached bool
}

// endCommands ends the turn's commands still running (a command belongs
// to the turn that ran it: nothing it started outlives the turn) and
// shows each one's final state.
func (t *turn) endCommands() {
	t.mu.Lock()
	c := t.conn
	cmds := make([]*shownCmd, 0, len(t.cmds))
	for _, sc := range t.cmds {
		cmds = append(cmds, sc)
	}
	t.mu.Unlock()
	if c == nil || c.term == nil || len(cmds) == 0 {
		return
	}
	for _, sc := range cmds {
		c.term.kill(sc.c, "killed")
	}
	for _, sc := range cmds {
		<-sc.c.done
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, sc := range cmds {
		sc.lm.text = renderCommand(sc.c, sc.dir, t.s.ac.Commands.Timeout)
		sc.endControls()
		t.attachOutput(t.s.m.runCtx(), sc)
	}
}

// renderCommand is a command's message: its line and state, then the last
// lines of its output in a code block, under Discord's message length.
func renderCommand(c *command, dir string, timeout time.Duration) string {
	head := commandHead(c, dir, commandState(c, timeout))
	kept, _ := shownLines(c, head)
	if strings.TrimSpace(strings.Join(kept, "")) == "" {
		return head
	}
	return head + "\n```\n" + strings.Join(kept, "\n") + "\n```"
}

// commandState is a command's state as its message shows it.
func commandState(c *command, timeout time.Duration) string {
	ended, exit, why, took := c.state()
	state := "⏳ running"
	if ended {
		d := took.Round(100 * time.Millisecond)
		switch {
		case why == "timeout":
			state = fmt.Sprintf("⏱️ killed: it ran past commandTimeout (%s)", timeout)
		case why == "killed":
			state = fmt.Sprintf("⏹️ killed after %s", d)
		case exit.ExitCode != nil && *exit.ExitCode == 0:
			state = fmt.Sprintf("✅ exit 0 · %s", d)
		case exit.ExitCode != nil:
			state = fmt.Sprintf("❌ exit %d · %s", *exit.ExitCode, d)
		case exit.Signal != nil:
			state = fmt.Sprintf("❌ %s · %s", *exit.Signal, d)
		}
	}
	return state
}

func commandHead(c *command, dir, state string) string {
	return fmt.Sprintf("💻 %s in %s · %s", codeSpan(c.Line, 600), codeSpan(dir, 200), state)
}

// shownTail is how much of a command's output its message looks at: the
// last lines of at most this many bytes.
const shownTail = 4 << 10

// shownLines are the last lines of the command's output that its
// message shows under head (at most 15, each cut at 200 characters,
// within the message length); all reports whether they are the whole
// output, unshortened.
func shownLines(c *command, head string) (kept []string, all bool) {
	tail := terminalText(c.out.Tail(shownTail))
	room := maxMessage - len([]rune(head)) - len("\n```\n\n```") - 1
	lines := strings.Split(strings.TrimRight(tail, "\n"), "\n")
	n, cut := 0, false
	for i := len(lines) - 1; i >= 0 && len(kept) < 15; i-- {
		l := []rune(lines[i])
		if len(l) > 200 {
			l, cut = append(l[:199], '…'), true
		}
		if n+len(l)+1 > room {
			break
		}
		n += len(l) + 1
		kept = append([]string{string(l)}, kept...)
	}
	out, truncated := c.out.String()
	all = !cut && !truncated && len(out) <= shownTail && len(kept) == len(lines)
	return kept, all
}

// outputFile is the name of a command's full output attached to the
// thread when its message cannot show it all.
const outputFile = "output.txt"

// attachOutput, once a command has ended, posts its whole kept output
// (at most outputByteLimit or DefaultOutputCap bytes, as plain text) as
// output.txt in a message of its own below the command's, when the
// command's message could not show all of it. That message is one
// delivery of the turn (its own id and entry, the file recorded as the
// entry's attachment). t.mu held.
func (t *turn) attachOutput(ctx context.Context, sc *shownCmd) {
	if sc.attached {
		return
	}
	sc.attached = true
	if _, all := shownLines(sc.c, commandHead(sc.c, sc.dir, commandState(sc.c, t.s.ac.Commands.Timeout))); all {
		return
	}
	out, truncated := sc.c.out.String()
	text := plainText(out)
	caption := fmt.Sprintf("📎 Full output of %s (%s)", codeSpan(sc.c.Line, 600), byteSize(len(text)))
	if truncated {
		caption = fmt.Sprintf("📎 Output of %s: the last %s (earlier output was cut at the output limit)", codeSpan(sc.c.Line, 600), byteSize(len(text)))
	}
	t.text = nil
	lm := t.newMsg(caption, nil)
	lm.files = []delivery.File{{Name: outputFile, ContentType: "text/plain; charset=utf-8", Data: []byte(text)}}
	t.show(ctx, lm)
}

// byteSize is n bytes for people: 980 B, 12.3 KiB, 1.0 MiB.
func byteSize(n int) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

var ansi = regexp.MustCompile(`\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[@-Z\\-_])`)

// terminalText is PTY output as plain text: escape sequences and carriage
// returns gone (a line redrawn shows its last state), no fence that could
// end the code block.
func terminalText(s string) string {
	return strings.ReplaceAll(plainText(s), "```", "`\u200b``")
}

// plainText is PTY output as a file shows it: escape sequences and
// carriage returns gone (a line redrawn keeps its last state), control
// characters but tabs dropped.
func plainText(s string) string {
	s = ansi.ReplaceAllString(s, "")
	s = strings.ReplaceAll(s, "\r\n", "\n")
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if j := strings.LastIndex(strings.TrimRight(l, "\r"), "\r"); j >= 0 {
			l = l[j+1:]
		}
		lines[i] = strings.Map(func(r rune) rune {
			if r < 0x20 && r != '\t' {
				return -1
			}
			return r
		}, l)
	}
	return strings.Join(lines, "\n")
}

// codeSpan shows s as inline code, at most n runes, without backticks.
func codeSpan(s string, n int) string {
	s = strings.NewReplacer("`", "ˋ", "\n", " ", "\r", " ").Replace(s)
	return "`" + truncate(s, n) + "`"
}

var errNoTerminal = errors.New("the terminal capability is off for this agent")
