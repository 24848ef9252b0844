package acp

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// The kept output is the end of what the command wrote, within the limit,
// starting and ending on whole characters.
func TestCapBuffer(t *testing.T) {
	limit := func(n int) *int { return &n }
	tests := []struct {
		name   string
		limit  *int
		writes []string
		want   string
		trunc  bool
	}{
		{"under the limit", limit(10), []string{"abc", "def"}, "abcdef", false},
		{"cut from the start", limit(4), []string{"abcdef"}, "cdef", true},
		{"never inside a character", limit(4), []string{"aé€"}, "€", true}, // a1 é2 €3: 4 bytes would start inside é
		{"a character split across writes is whole", limit(10), []string{"x\xe2\x82", "\xac"}, "x€", false},
		{"an incomplete last character waits", limit(10), []string{"x\xe2\x82"}, "x", false},
		{"zero keeps nothing", limit(0), []string{"abc"}, "", true},
		{"no limit: the default cap", nil, []string{strings.Repeat("a", DefaultOutputCap+5)}, strings.Repeat("a", DefaultOutputCap), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newCapBuffer(tt.limit)
			for _, w := range tt.writes {
				b.Write([]byte(w))
			}
			got, trunc := b.String()
			if got != tt.want || trunc != tt.trunc || !utf8.ValidString(got) {
				t.Errorf("got %q truncated=%v, want %q truncated=%v", got, trunc, tt.want, tt.trunc)
			}
		})
	}
}

// What the thread shows of terminal output: no escape sequences, a
// redrawn line at its last state, no fence that ends the code block.
func TestTerminalText(t *testing.T) {
	tests := []struct{ in, want string }{
		{"\x1b[31mred\x1b[0m\r\n", "red\n"},
		{"10%\r50%\r100%\r\ndone", "100%\ndone"},
		{"a```b", "a`\u200b``b"},
		{"\x1b]0;title\x07ok\x07", "ok"},
	}
	for _, tt := range tests {
		if got := terminalText(tt.in); got != tt.want {
			t.Errorf("terminalText(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// A command's message never passes Discord's length, however long its
// line and output; it keeps the last lines.
func TestRenderCommandStaysUnderTheLimit(t *testing.T) {
	c := &command{Line: strings.Repeat("x", 5000), out: newCapBuffer(nil), done: make(chan struct{})}
	for i := 0; i < 500; i++ {
		c.out.Write([]byte(strings.Repeat("y", 300) + "\n"))
	}
	c.out.Write([]byte("last line\n"))
	got := renderCommand(c, strings.Repeat("d", 500), 0)
	if n := utf8.RuneCountInString(got); n > maxMessage {
		t.Errorf("%d characters", n)
	}
	if !strings.Contains(got, "last line\n```") || !strings.Contains(got, "⏳ running") {
		t.Errorf("message %q", got)
	}
}

// A command line is shown as the words it runs, quoted where a shell would
// read them otherwise.
func TestCommandLine(t *testing.T) {
	if got := commandLine("sh", []string{"-c", "echo 'hi' && ls"}); got != `sh -c 'echo '\''hi'\'' && ls'` {
		t.Errorf("got %s", got)
	}
	if got := commandLine("go", []string{"test", "./..."}); got != "go test ./..." {
		t.Errorf("got %s", got)
	}
}
