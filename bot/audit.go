package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/adapter/discord"
	"github.com/agentbot/agentbot/adapter/matrix"
	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/core/audit"
	"github.com/agentbot/agentbot/core/sessionkey"
)

// Audit is `bot audit`: what conversation target (a channel, thread or room
// id, or "all") displays now on its platform, compared with the
// transcripts of st; it writes one line (asJSON: one JSON object) per
// difference, naming the message id, and returns how many. An intact
// audit writes one summary line (nothing with asJSON). A conversation that
// cannot be read is an error; the others are still written.
func Audit(ctx context.Context, cfg *config.Config, st Store, target string, w io.Writer, asJSON bool) (int, error) {
	displays, err := auditDisplays(cfg, nil, nil, zerolog.Nop())
	if err != nil {
		return 0, err
	}
	a := audit.New(audit.Options{}, audit.Deps{Transcripts: st, Displays: displays, Outbox: st})
	var reports []audit.Report
	if target == "all" {
		reports, err = a.All(ctx)
	} else {
		var r audit.Report
		if r, err = a.Conversation(ctx, target); err == nil {
			reports = append(reports, r)
		}
	}
	n, werr := printAudit(w, reports, asJSON)
	if werr != nil {
		return n, werr
	}
	if err == nil && n == 0 && !asJSON {
		_, err = fmt.Fprintf(w, "%d conversation(s) audited: the transcripts hold what the chat displays\n", len(reports))
	}
	return n, err
}

// auditDisplays are the platforms' readers the config reaches; base is
// the Discord transport's base (nil: the default), mx the running bot's
// Matrix client (nil: one is made).
func auditDisplays(cfg *config.Config, base http.RoundTripper, mx *matrix.Client, log zerolog.Logger) (map[string]audit.Display, error) {
	out := map[string]audit.Display{}
	if strings.TrimSpace(cfg.Discord.Token) != "" {
		h, err := discord.NewHistory(discord.HistoryOptions{Token: cfg.Discord.Token, APIURL: cfg.Discord.APIURL, BaseTransport: base})
		if err != nil {
			return nil, err
		}
		out[sessionkey.PlatformDiscord] = h
	}
	if mx == nil && cfg.Matrix.Enabled() {
		side, err := newMatrixClient(cfg.Matrix, log)
		if err != nil {
			return nil, err
		}
		mx = side.client
	}
	if mx != nil {
		out[sessionkey.PlatformMatrix] = mx
	}
	return out, nil
}

// newAuditor builds the audit over the running bot's store and platforms:
// the periodic audit (audit.every; Run does nothing when it is 0) and the
// console's conversation view.
func (a *App) newAuditor(d Deps) error {
	var mx *matrix.Client
	if a.matrix != nil {
		mx = a.matrix.client
	}
	displays, err := auditDisplays(a.cfg, d.BaseTransport, mx, a.log)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	a.auditor = audit.New(audit.Options{Every: a.cfg.Audit.Every}, audit.Deps{Transcripts: a.store, Displays: displays, Outbox: a.store, Clock: a.clock,
		Log: a.log.With().Str("component", "audit").Logger(), Count: func(k audit.Kind, n int) { a.metrics.AuditDifferences(string(k), n) }})
	return nil
}

// auditJSON is one difference in `bot audit -json`.
type auditJSON struct {
	Conversation string `json:"conversation"`
	MessageID    string `json:"messageId"`
	Kind         string `json:"kind"`
	Detail       string `json:"detail"`
	SessionKey   string `json:"sessionKey,omitempty"`
	Seq          uint64 `json:"seq,omitempty"`
	Transcript   string `json:"transcript"`
	Display      string `json:"display"`
}

// printAudit writes every difference of reports; it returns how many.
func printAudit(w io.Writer, reports []audit.Report, asJSON bool) (int, error) {
	n := 0
	enc := json.NewEncoder(w)
	for _, r := range reports {
		for _, d := range r.Differences() {
			n++
			j := auditJSON{Conversation: r.Target.ID, MessageID: d.MessageID, Kind: string(d.Diff), Detail: d.Detail, Display: d.Shown()}
			if d.Entry != nil {
				j.SessionKey, j.Seq, j.Transcript = d.Entry.SessionKey, d.Entry.Seq, d.Entry.Latest
			}
			var err error
			if asJSON {
				err = enc.Encode(j)
			} else {
				_, err = fmt.Fprintf(w, "%s message %s: %s: %s\n  transcript: %s\n  display:    %s\n", j.Conversation, j.MessageID, j.Kind, j.Detail,
					auditSide(d.Entry != nil, fmt.Sprintf("%q (%s #%d)", j.Transcript, j.SessionKey, j.Seq)), auditSide(len(d.Messages) > 0, fmt.Sprintf("%q", j.Display)))
			}
			if err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

func auditSide(ok bool, s string) string {
	if !ok {
		return "(none)"
	}
	return s
}
