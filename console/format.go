package console

import (
	"github.com/agentbot/agentbot/core/usage"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agentbot/agentbot/internal/redact"
	"github.com/agentbot/agentbot/scheduler"
)

func (c *Console) fmtTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.In(c.o.Location).Format("2006-01-02 15:04:05 MST")
}

func fmtIn(t time.Time, loc *time.Location) string {
	if t.IsZero() {
		return "—"
	}
	return t.In(loc).Format("Mon 2006-01-02 15:04 MST")
}

func human(d time.Duration) string {
	if d < 0 {
		d = -d
	}
	return scheduler.HumanDuration(d)
}

// countdown describes a deadline: "in 3h5m", "passed 2m ago" or "off".
func countdown(deadline, now time.Time, enabled bool) (string, bool) {
	if !enabled {
		return "off", false
	}
	if d := deadline.Sub(now); d > 0 {
		return "in " + human(d), false
	}
	return "passed " + human(now.Sub(deadline)) + " ago", true
}

func preview(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// Redact replaces token-looking strings (Discord bot tokens, webhook and
// interaction URL tokens, interaction tokens, credentials) with
// "[redacted]", by the rules of internal/redact.
func Redact(s string) string { return redact.String(s) }

func (c *Console) funcs() template.FuncMap {
	return template.FuncMap{
		"t":       c.fmtTime,
		"sessURL": sessURL,
		"jobURL":  func(id string) string { return "/jobs/" + url.PathEscape(id) },
		"join":    strings.Join,
		"preview": preview,
		"sub":     func(a, b int) int { return a - b },
		"rows":    func(name string, rows []usage.Row) map[string]any { return map[string]any{"Name": name, "Rows": rows} },
	}
}

func sessURL(key string) string { return "/sessions/" + url.PathEscape(key) }

// query builds "path?k=v..." dropping empty values.
func query(path string, kv ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

type pager struct {
	Page, Pages, Total int
	Prev, Next         string
	From, To           int // 1-based rows shown
}

func pageParam(r *http.Request) (int, error) {
	v := r.URL.Query().Get("page")
	if v == "" {
		return 1, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, badRequest("page %q is not a positive number", v)
	}
	return n, nil
}

// paginate returns the [lo, hi) slice bounds of page among total rows and
// the links around it; link(n) is the URL of page n.
func paginate(page, size, total int, link func(int) string) (int, int, pager) {
	pages := max(1, (total+size-1)/size)
	lo := min((page-1)*size, total)
	hi := min(lo+size, total)
	p := pager{Page: page, Pages: pages, Total: total, From: lo + 1, To: hi}
	if page > 1 {
		p.Prev = link(min(page-1, pages))
	}
	if page < pages {
		p.Next = link(page + 1)
	}
	return lo, hi, p
}
