package matrix

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode"
)

// CommandPrefix starts a text command: Matrix has no slash commands, so "!spawn ..." stands for Discord's /spawn.
const CommandPrefix = "!"

// Command is a parsed text command: the same names and options as the Discord slash commands of DESIGN.md §4.
type Command struct {
	Name    string            // spawn, focus, unfocus, agents, session, cron, reset, stop, help
	Sub     string            // session idle|max-age|unbind; cron add|list|remove|run|runs
	Options map[string]string // bool options are "true" or "false"
	// EventID is the event that carried the command (set by the gateway, not parsed): the core runs one event's
	// command at most once, across restarts (command.Invocation.EventID).
	EventID string
}

type optSpec struct {
	name     string
	required bool
	boolean  bool
}

type cmdSpec struct {
	opts []optSpec
	// rest is the option the words that are not name=value pairs make up (joined by single spaces).
	rest string
	subs map[string]cmdSpec
}

var commandSpecs = map[string]cmdSpec{
	"spawn":   {rest: "task", opts: []optSpec{{name: "task", required: true}, {name: "label"}, {name: "agent"}, {name: "thread", boolean: true}}},
	"focus":   {rest: "target", opts: []optSpec{{name: "target", required: true}}},
	"unfocus": {},
	"agents":  {},
	"usage":   {rest: "period", opts: []optSpec{{name: "period"}}},
	"session": {subs: map[string]cmdSpec{
		"idle":    {rest: "duration", opts: []optSpec{{name: "duration"}}},
		"max-age": {rest: "duration", opts: []optSpec{{name: "duration"}}},
		"unbind":  {},
	}},
	"cron": {subs: map[string]cmdSpec{
		"add": {rest: "prompt", opts: []optSpec{{name: "schedule", required: true}, {name: "prompt", required: true},
			{name: "target"}, {name: "tz"}, {name: "to"}}},
		"list":   {},
		"remove": {rest: "id", opts: []optSpec{{name: "id", required: true}}},
		"run":    {rest: "id", opts: []optSpec{{name: "id", required: true}}},
		"runs":   {rest: "id", opts: []optSpec{{name: "id", required: true}}},
	}},
	"reset": {},
	"stop":  {rest: "target", opts: []optSpec{{name: "target"}}},
	"memory": {subs: map[string]cmdSpec{
		"search": {rest: "query", opts: []optSpec{{name: "query", required: true}}},
		"list":   {},
		"forget": {rest: "id", opts: []optSpec{{name: "id", required: true}}},
	}},
	// help lists the commands and the values their options take here
	// (what Discord's autocomplete offers).
	"help": {},
	"ps":   {},
}

// ErrNotCommand: the text does not start with CommandPrefix and a known command name (it is a plain message).
var ErrNotCommand = errors.New("not a command")

// ParseCommand parses body as a text command. Grammar: "!name [sub] (word | key=value | key="quoted value")*";
// the words that are not key=value make up the command's main free-text option (task for spawn, prompt for
// cron add, target for focus and stop, ...). A body that is no known command gives ErrNotCommand (the caller
// treats it as a message); a known command with bad options gives an error whose text is safe to show the user.
func ParseCommand(body string) (Command, error) {
	body = strings.TrimSpace(body)
	if !strings.HasPrefix(body, CommandPrefix) {
		return Command{}, ErrNotCommand
	}
	words, err := splitWords(body[len(CommandPrefix):])
	if err != nil {
		return Command{}, err
	}
	if len(words) == 0 {
		return Command{}, ErrNotCommand
	}
	name := strings.ToLower(words[0].text)
	spec, ok := commandSpecs[name]
	if !ok || words[0].quoted {
		return Command{}, ErrNotCommand
	}
	words = words[1:]
	cmd := Command{Name: name, Options: map[string]string{}}
	if spec.subs != nil {
		if len(words) == 0 {
			return Command{}, fmt.Errorf("%s%s needs one of: %s", CommandPrefix, name, strings.Join(keys(spec.subs), ", "))
		}
		sub := strings.ToLower(words[0].text)
		sspec, ok := spec.subs[sub]
		if !ok {
			return Command{}, fmt.Errorf("%s%s: unknown sub-command %q (one of: %s)", CommandPrefix, name, words[0].text, strings.Join(keys(spec.subs), ", "))
		}
		cmd.Sub, spec, words = sub, sspec, words[1:]
	}
	var rest []string
	for _, w := range words {
		if k, v, ok := strings.Cut(w.text, "="); ok && !w.quoted && k != "" {
			o, known := spec.opt(strings.ToLower(k))
			if !known {
				return Command{}, fmt.Errorf("%s: unknown option %q", cmd.label(), k)
			}
			if _, dup := cmd.Options[o.name]; dup {
				return Command{}, fmt.Errorf("%s: option %q given twice", cmd.label(), o.name)
			}
			if o.boolean {
				b, err := parseBool(v)
				if err != nil {
					return Command{}, fmt.Errorf("%s: option %s: %w", cmd.label(), o.name, err)
				}
				v = b
			}
			cmd.Options[o.name] = v
			continue
		}
		rest = append(rest, w.text)
	}
	if len(rest) > 0 {
		if spec.rest == "" {
			return Command{}, fmt.Errorf("%s takes no text (got %q)", cmd.label(), strings.Join(rest, " "))
		}
		if _, dup := cmd.Options[spec.rest]; dup {
			return Command{}, fmt.Errorf("%s: option %q given twice", cmd.label(), spec.rest)
		}
		cmd.Options[spec.rest] = strings.Join(rest, " ")
	}
	for _, o := range spec.opts {
		if v, ok := cmd.Options[o.name]; o.required && (!ok || strings.TrimSpace(v) == "") {
			return Command{}, fmt.Errorf("%s needs %s", cmd.label(), o.name)
		}
	}
	return cmd, nil
}

func (c Command) label() string {
	if c.Sub != "" {
		return CommandPrefix + c.Name + " " + c.Sub
	}
	return CommandPrefix + c.Name
}

func (s cmdSpec) opt(name string) (optSpec, bool) {
	for _, o := range s.opts {
		if o.name == name {
			return o, true
		}
	}
	return optSpec{}, false
}

func keys(m map[string]cmdSpec) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func parseBool(v string) (string, error) {
	switch strings.ToLower(v) {
	case "true", "yes", "on", "1":
		return "true", nil
	case "false", "no", "off", "0":
		return "false", nil
	}
	return "", fmt.Errorf("%q is not yes or no", v)
}

type word struct {
	text   string
	quoted bool // the whole word was one quoted string
}

// splitWords splits on white space; "double" or 'single' quotes group (also inside key="a b"); a backslash escapes
// the next character inside double quotes.
func splitWords(s string) ([]word, error) {
	var out []word
	var cur strings.Builder
	inWord, quotedWhole := false, false
	var quote rune
	flush := func() {
		if inWord {
			out = append(out, word{text: cur.String(), quoted: quotedWhole})
		}
		cur.Reset()
		inWord, quotedWhole = false, false
	}
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else if r == '\\' && quote == '"' && i+1 < len(rs) {
				i++
				cur.WriteRune(rs[i])
			} else {
				cur.WriteRune(r)
			}
		case r == '"' || r == '\'':
			if !inWord {
				quotedWhole = true
			}
			inWord = true
			quote = r
		case unicode.IsSpace(r):
			flush()
		default:
			if quotedWhole {
				quotedWhole = false
			}
			inWord = true
			cur.WriteRune(r)
		}
	}
	if quote != 0 {
		return nil, errors.New("unterminated quote")
	}
	flush()
	return out, nil
}
