package console

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/usage"
	"github.com/agentbot/agentbot/store/bolt"
)

// seedUsage stores model usage of the last days: two models, two agents,
// and one record older than the page's 30 days.
func seedUsage(t testing.TB, st *bolt.Store) {
	t.Helper()
	for _, r := range []usage.Record{
		{At: t0.Add(-time.Hour), Model: "default", Agent: "main", User: "42", Input: 1200, Output: 300, Cached: 1000, Cost: 0.0123},
		{At: t0.Add(-26 * time.Hour), Model: "backup", Agent: "scribe", User: "43", Input: 500, Output: 50, Cost: 0.5},
		{At: t0.Add(-3 * 24 * time.Hour), Model: "default", Agent: "main", User: "42", Input: 100, Output: 10, Cost: 0.001},
		{At: t0.Add(-40 * 24 * time.Hour), Model: "ancient", Agent: "main", User: "42", Input: 99999, Output: 1, Cost: 99},
	} {
		if err := st.AddUsage(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
}

// usageWants is what the seeded Usage page shows (TestEveryPageRenders
// and the browser test).
var usageWants = []string{"Model usage", "Tokens per day by model", "Cost per day by agent", "<svg", "<rect", "default", "backup",
	"scribe", "1300", "cost 0.5133", "Mar 10 default: 1500", "Mar 9 scribe: 0.5"}

// TestUsagePage: the chart bars and tables sum the last 30 days only, per
// model and per agent.
func TestUsagePage(t *testing.T) {
	st := openStore(t)
	seedUsage(t, st)
	h := newTestConsole(t, st, "")
	code, body := get(t, h, http.MethodGet, "/usage")
	if code != http.StatusOK {
		t.Fatalf("GET /usage = %d\n%s", code, body)
	}
	mustContain(t, "/usage", body, usageWants...)
	mustContain(t, "/usage", body, `<td class="mono">default</td><td>2</td><td>1300</td><td>310</td><td>1000</td><td>0.0133</td>`)
	if strings.Contains(body, "ancient") || strings.Contains(body, "99999") {
		t.Error("a record older than 30 days is shown")
	}
	if strings.Contains(body, "<script") {
		t.Error("the page has a script")
	}
}

// checkCharts asks the browser what it drew on the Usage page: two SVG
// charts, each with bars of a real size inside the chart.
func checkCharts(t *testing.T, ctx context.Context, b *browser) {
	t.Helper()
	var res struct {
		Result struct{ Value string }
	}
	err := b.call(ctx, "Runtime.evaluate", map[string]any{"returnByValue": true, "expression": `JSON.stringify(
		Array.from(document.querySelectorAll('svg.chart'), svg => {
			const box = svg.getBoundingClientRect();
			return Array.from(svg.querySelectorAll('rect'), r => { const b = r.getBoundingClientRect();
				return b.height > 0 && b.width > 0 && b.top >= box.top && b.bottom <= box.bottom + 0.5; }); }))`}, &res)
	if err != nil {
		t.Fatal(err)
	}
	var charts [][]bool
	if err := json.Unmarshal([]byte(res.Result.Value), &charts); err != nil {
		t.Fatalf("charts: %v (%s)", err, res.Result.Value)
	}
	if len(charts) != 2 {
		t.Fatalf("/usage: %d charts drawn, want 2", len(charts))
	}
	for i, bars := range charts {
		if len(bars) < 3 {
			t.Errorf("/usage: chart %d has %d bars, want one per model/agent and day with usage (3)", i, len(bars))
		}
		for j, ok := range bars {
			if !ok {
				t.Errorf("/usage: chart %d bar %d is empty or outside its chart", i, j)
			}
		}
	}
}
