package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	modelusage "github.com/agentbot/agentbot/core/usage"
)

// ParseSince reads -since: a Go duration (36h, 90m) or a number of days
// (7d).
func ParseSince(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		d, err := strconv.Atoi(n)
		if err != nil || d <= 0 {
			return 0, fmt.Errorf("-since %q: want a number of days like 7d, or a duration like 36h", s)
		}
		return time.Duration(d) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("-since %q: want a number of days like 7d, or a duration like 36h", s)
	}
	return d, nil
}

// usage lists usage records from since (an RFC 3339 time in args[0]):
// with asJSON one record per line, else a table and the totals by model.
func (in inspector) usage(ctx context.Context, w io.Writer, args []string, asJSON bool) error {
	var since time.Time
	if len(args) > 0 {
		var err error
		if since, err = time.Parse(time.RFC3339Nano, args[0]); err != nil {
			return fmt.Errorf("usage: since %q is no RFC 3339 time: %w", args[0], err)
		}
	}
	rs, err := in.store.Usage(ctx, modelusage.Filter{Since: since})
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(w)
		for _, r := range rs {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AT\tMODEL\tAGENT\tUSER\tSERVER\tINPUT\tOUTPUT\tCACHED\tCOST\tRUN")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%.4f\t%s\n", r.At.UTC().Format(time.RFC3339), r.Model, r.Agent, dash(r.User), dash(r.Place),
			r.Input, r.Output, r.Cached, r.Cost, r.Run)
	}
	fmt.Fprintln(tw, "\nMODEL\tCALLS\tINPUT\tOUTPUT\tCACHED\tCOST")
	for _, row := range append(modelusage.By(rs, modelusage.ByModel), modelusage.Row{Key: "total", Totals: modelusage.Sum(rs)}) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.4f\n", row.Key, row.Calls, row.Input, row.Output, row.Cached, row.Cost)
	}
	return tw.Flush()
}
