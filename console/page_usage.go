package console

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/agentbot/agentbot/core/usage"
)

// UsageReader reads model usage records. The console shows the Usage page
// when its Store also implements it (store/bolt and store/postgres do).
type UsageReader interface {
	Usage(ctx context.Context, f usage.Filter) ([]usage.Record, error)
}

// usageDays is how many days the Usage page shows.
const usageDays = 30

// chartColors are the series' fills; series past the palette are summed
// as "other".
var chartColors = []string{"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#b07aa1", "#edc948"}

const (
	chartW, chartH     = 900, 220
	chartLeft, chartBt = 70, 28
)

type chartBar struct {
	X, Y, W, H float64
	Fill       string
	Title      string
}

type chartLabel struct {
	X, Y float64
	Text string
}

type legendItem struct{ Name, Fill string }

// chart is a stacked bar chart drawn as inline SVG by the template (no
// JavaScript, nothing fetched).
type chart struct {
	Title         string
	Width, Height int
	Bars          []chartBar
	XLabels       []chartLabel
	YLabels       []chartLabel
	Legend        []legendItem
	Empty         bool
}

type usagePage struct {
	base
	Available bool
	Since     string
	Tokens    chart
	Cost      chart
	Models    []usage.Row
	Agents    []usage.Row
	Total     usage.Totals
}

// usage renders the last 30 days: tokens per day by model and cost per
// day by agent, and the totals by model and by agent.
func (c *Console) usage(r *http.Request) (any, error) {
	p := usagePage{base: c.base("usage", "Usage")}
	ur, ok := c.o.Store.(UsageReader)
	if !ok {
		return p, nil
	}
	p.Available = true
	now := c.o.Now().In(c.o.Location)
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, c.o.Location)
	first := today.AddDate(0, 0, -(usageDays - 1))
	days := make([]time.Time, usageDays)
	for i := range days {
		days[i] = first.AddDate(0, 0, i)
	}
	day := func(t time.Time) int {
		t = t.In(c.o.Location)
		return int(time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, c.o.Location).Sub(first).Hours()+12) / 24
	}
	rs, err := ur.Usage(r.Context(), usage.Filter{Since: first})
	if err != nil {
		return nil, err
	}
	p.Since = c.fmtTime(first)
	tokens := func(r usage.Record) float64 { return float64(r.Tokens()) }
	cost := func(r usage.Record) float64 { return r.Cost }
	p.Tokens = stacked("Tokens per day by model", days, rs, usage.ByModel, tokens, day, func(v float64) string { return fmt.Sprintf("%.0f", v) })
	p.Cost = stacked("Cost per day by agent", days, rs, usage.ByAgent, cost, day, func(v float64) string { return fmt.Sprintf("%.4g", v) })
	p.Models = usage.By(rs, usage.ByModel)
	p.Agents = usage.By(rs, usage.ByAgent)
	p.Total = usage.Sum(rs)
	return p, nil
}

// stacked builds a chart of value per day (days oldest first) split by
// series (the largest series first, the rest as "other").
func stacked(title string, days []time.Time, rs []usage.Record, series func(usage.Record) string, value func(usage.Record) float64,
	day func(time.Time) int, format func(float64) string) chart {
	ch := chart{Title: title, Width: chartW, Height: chartH}
	// Series ordered by total, largest first.
	totals := map[string]float64{}
	for _, r := range rs {
		totals[series(r)] += value(r)
	}
	names := make([]string, 0, len(totals))
	for n := range totals {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int {
		switch {
		case totals[a] > totals[b]:
			return -1
		case totals[a] < totals[b]:
			return 1
		}
		return cmp.Compare(a, b)
	})
	keep := len(chartColors) - 1
	if len(names) <= len(chartColors) {
		keep = len(names)
	}
	index := map[string]int{}
	for i, n := range names[:keep] {
		index[n] = i
		ch.Legend = append(ch.Legend, legendItem{Name: n, Fill: chartColors[i]})
	}
	nSeries := keep
	if len(names) > keep {
		ch.Legend = append(ch.Legend, legendItem{Name: "other", Fill: chartColors[keep]})
		nSeries++
	}
	grid := make([][]float64, len(days))
	for i := range grid {
		grid[i] = make([]float64, nSeries)
	}
	for _, r := range rs {
		d := day(r.At)
		if d < 0 || d >= len(days) {
			continue
		}
		s, ok := index[series(r)]
		if !ok {
			s = keep
		}
		grid[d][s] += value(r)
	}
	peak := 0.0
	for _, row := range grid {
		sum := 0.0
		for _, v := range row {
			sum += v
		}
		peak = max(peak, sum)
	}
	if peak == 0 {
		ch.Empty = true
		peak = 1
	}
	plotH := float64(chartH - chartBt - 10)
	slot := float64(chartW-chartLeft) / float64(len(days))
	for i, row := range grid {
		x := float64(chartLeft) + float64(i)*slot + slot*0.1
		y := float64(chartH - chartBt)
		for s, v := range row {
			if v == 0 {
				continue
			}
			h := v / peak * plotH
			y -= h
			ch.Bars = append(ch.Bars, chartBar{X: x, Y: y, W: slot * 0.8, H: h, Fill: ch.Legend[s].Fill,
				Title: fmt.Sprintf("%s %s: %s", days[i].Format("Jan 2"), ch.Legend[s].Name, format(v))})
		}
		if i%5 == 0 || i == len(days)-1 {
			ch.XLabels = append(ch.XLabels, chartLabel{X: x + slot*0.4, Y: float64(chartH - 8), Text: days[i].Format("Jan 2")})
		}
	}
	for _, f := range []float64{0, 0.5, 1} {
		ch.YLabels = append(ch.YLabels, chartLabel{X: chartLeft - 6, Y: float64(chartH-chartBt) - f*plotH + 4, Text: format(f * peak)})
	}
	return ch
}
