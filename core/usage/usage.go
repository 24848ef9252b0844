package usage

import (
	"cmp"
	"context"
	"slices"
	"time"
)

// Record is one model call's usage.
type Record struct {
	At    time.Time `json:"at"`
	Model string    `json:"model"` // the models entry that answered
	Agent string    `json:"agent"`
	// User is the acting user: the turn's author, a job's creator, a
	// subagent's spawner ("" when nobody acted: a background run's seed).
	User string `json:"user,omitempty"`
	// Place is the server (Discord guild) or room the work was for; "" in
	// a DM.
	Place        string `json:"place,omitempty"`
	Conversation string `json:"conversation,omitempty"`
	SessionKey   string `json:"sessionKey"`
	// Run names the work: a turn's delivery id, a job run, a subagent.
	Run    string  `json:"run,omitempty"`
	Input  int64   `json:"input"`
	Output int64   `json:"output"`
	Cached int64   `json:"cached"`
	Cost   float64 `json:"cost"`
}

// Tokens is the record's input plus output tokens.
func (r Record) Tokens() int64 { return r.Input + r.Output }

// Filter selects records at or after Since, of User and of Place when set.
type Filter struct {
	Since time.Time
	User  string
	Place string
}

// Match reports whether r passes f.
func (f Filter) Match(r Record) bool {
	return !r.At.Before(f.Since) && (f.User == "" || r.User == f.User) && (f.Place == "" || r.Place == f.Place)
}

// Store keeps usage records.
type Store interface {
	// AddUsage stores rs in one transaction (all or none).
	AddUsage(ctx context.Context, rs ...Record) error
	// Usage lists the records f selects, oldest first.
	Usage(ctx context.Context, f Filter) ([]Record, error)
	// PruneUsage deletes records older than before and returns how many.
	PruneUsage(ctx context.Context, before time.Time) (int, error)
}

// Price is a model's price in currency units per million tokens.
type Price struct {
	Input  float64
	Output float64
}

// Cost is what in input and out output tokens cost at p.
func (p Price) Cost(in, out int64) float64 {
	return (float64(in)*p.Input + float64(out)*p.Output) / 1e6
}

// Totals are summed records.
type Totals struct {
	Calls  int     `json:"calls"`
	Input  int64   `json:"input"`
	Output int64   `json:"output"`
	Cached int64   `json:"cached"`
	Cost   float64 `json:"cost"`
}

// Add counts r.
func (t *Totals) Add(r Record) {
	t.Calls++
	t.Input += r.Input
	t.Output += r.Output
	t.Cached += r.Cached
	t.Cost += r.Cost
}

// Tokens is input plus output.
func (t Totals) Tokens() int64 { return t.Input + t.Output }

// Sum totals rs.
func Sum(rs []Record) Totals {
	var t Totals
	for _, r := range rs {
		t.Add(r)
	}
	return t
}

// Row is the totals of one group.
type Row struct {
	Key string `json:"key"`
	Totals
}

// By groups rs by key and sums each group, the largest (tokens, then
// cost, then key) first.
func By(rs []Record, key func(Record) string) []Row {
	idx := map[string]int{}
	var out []Row
	for _, r := range rs {
		k := key(r)
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, Row{Key: k})
		}
		out[i].Add(r)
	}
	slices.SortFunc(out, func(a, b Row) int {
		if c := cmp.Compare(b.Tokens(), a.Tokens()); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Cost, a.Cost); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
	return out
}

// ByModel, ByAgent and ByUser are keys for By.
func ByModel(r Record) string { return r.Model }

// ByAgent groups by agent.
func ByAgent(r Record) string { return r.Agent }

// ByUser groups by acting user.
func ByUser(r Record) string { return r.User }
