package bot

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"text/tabwriter"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/adapter/discord"
	"github.com/agentbot/agentbot/config"
)

// LiveFindings asks Discord what the configured bot may do where, against
// what the config needs of it (discord.CheckOptions).
func LiveFindings(ctx context.Context, cfg *config.Config, base http.RoundTripper) ([]discord.Finding, error) {
	c, err := discord.NewChecker(discord.CheckOptions{
		Token: cfg.Discord.Token, APIURL: cfg.Discord.APIURL, BaseTransport: base, Guilds: cfg.Discord.Guilds,
		ThreadBindings: cfg.Discord.ThreadBindings.Enabled,
		AllowChannels:  cfg.Discord.Access.Allow.Channels, DenyChannels: cfg.Discord.Access.Deny.Channels,
		Routes: routeIDs(cfg),
	})
	if err != nil {
		return nil, err
	}
	return c.Check(ctx)
}

// PrintFindings writes the table of what is missing where, with the fix;
// it returns how many findings are required.
func PrintFindings(w io.Writer, fs []discord.Finding) int {
	required := 0
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\tSERVER\tCHANNEL\tMISSING\tNEEDED FOR\tFIX")
	for _, f := range fs {
		mark := "⚠"
		if f.Required {
			mark = "✘"
			required++
		}
		missing, needed := f.MissingNames(), f.NeededFor()
		if f.Problem != "" {
			missing, needed = f.Problem, "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", mark, dash(f.Guild), dash(f.Channel), missing, needed, f.Fix)
	}
	_ = tw.Flush()
	return required
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// LogLiveFindings logs the live check's findings once, as warnings, at
// the start of `bot run` (the same check as `bot doctor -live`).
func LogLiveFindings(ctx context.Context, cfg *config.Config, base http.RoundTripper, log zerolog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	fs, err := LiveFindings(ctx, cfg, base)
	if err != nil {
		if ctx.Err() == nil {
			log.Warn().Err(err).Msg("live permission check failed; run bot doctor -live")
		}
		return
	}
	for _, f := range fs {
		ev := log.Warn().Str("fix", f.Fix)
		if f.Guild != "" {
			ev = ev.Str("guild", f.Guild).Str("guildID", f.GuildID)
		}
		if f.Channel != "" {
			ev = ev.Str("channel", f.Channel).Str("channelID", f.ChannelID)
		}
		if f.Problem != "" {
			ev.Bool("required", f.Required).Msg(f.Problem)
			continue
		}
		ev.Str("missing", f.MissingNames()).Str("neededFor", f.NeededFor()).Bool("required", f.Required).Msg("the bot lacks a permission")
	}
}
