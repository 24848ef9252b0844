package command

import (
	"context"
	"fmt"
	"strings"
)

// helpLines are the commands and their options, in the invocation's
// syntax, each with the option whose values help lists ("" none).
var helpLines = []struct {
	name, sub string
	usage     []string
	option    string
}{
	{"spawn", "", []string{"spawn task [label] [agent] [thread]"}, "agent"},
	{"focus", "", []string{"focus target"}, "target"},
	{"unfocus", "", []string{"unfocus", "agents", "reset", "help"}, ""},
	{"session", "idle", []string{"session idle|max-age [duration]", "session unbind"}, "duration"},
	{"cron", "add", []string{"cron add schedule prompt [target] [tz] [to]", "cron list"}, ""},
	{"cron", "remove", []string{"cron remove|run id"}, "id"},
	{"cron", "runs", []string{"cron runs id"}, "id"},
	{"stop", "", []string{"stop [target]"}, "target"},
	{"ps", "", []string{"ps"}, ""},
	{"usage", "", []string{"usage [day|week|month]"}, ""},
}

// help lists the commands and, for each option naming a job, a run, a
// label or an agent, the values the invoker may use here: Discord's
// autocomplete lists (Complete), for platforms without it (Matrix's !help).
// A public answer (PublicReplies) names only what belongs to this
// conversation, as /cron list does there.
func (c *Commands) help(ctx context.Context, v Invocation) Reply {
	var b strings.Builder
	fmt.Fprintf(&b, "Commands (%s):\n", v.Platform.Name)
	for _, l := range helpLines {
		b.WriteString("• " + v.Platform.Prefix + strings.Join(l.usage, " · "+v.Platform.Prefix))
		if l.option != "" {
			w := v
			w.Name, w.Sub = l.name, l.sub
			var vals []string
			for _, ch := range c.complete(ctx, w, l.option, "", v.Platform.PublicReplies) {
				vals = append(vals, helpValue(ch))
			}
			if len(vals) > 0 {
				fmt.Fprintf(&b, " — %s: %s", l.option, strings.Join(vals, ", "))
			}
		}
		b.WriteString("\n")
	}
	return Reply{Text: strings.TrimRight(b.String(), "\n"), Public: v.Platform.PublicReplies}
}

// helpValue is a choice as help shows it: the value, and its description
// when that says more.
func helpValue(ch Choice) string {
	if ch.Name == ch.Value {
		return "`" + ch.Value + "`"
	}
	return fmt.Sprintf("`%s` (%s)", ch.Value, ch.Name)
}
