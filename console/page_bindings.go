package console

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/agentbot/agentbot/core/binding"
)

func isActive(r binding.Record) bool { return r.Status != binding.StatusEnded }

// sortBindings orders active before ended, then newest bound first, then
// by id. It sorts small keys and permutes once: records are large, and
// swapping them dominated sorting 100k of them.
func sortBindings(recs []binding.Record) {
	type key struct {
		ended bool
		at    int64
		id    string
		i     int
	}
	keys := make([]key, len(recs))
	for i, r := range recs {
		keys[i] = key{!isActive(r), r.BoundAt.UnixNano(), r.ID, i}
	}
	slices.SortFunc(keys, func(a, b key) int {
		if a.ended != b.ended {
			if a.ended {
				return 1
			}
			return -1
		}
		if c := cmp.Compare(b.at, a.at); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	sorted := make([]binding.Record, len(recs))
	for i, k := range keys {
		sorted[i] = recs[k.i]
	}
	copy(recs, sorted)
}

type bindingRow struct {
	ID, Status, Kind, Label, BoundBy, Target string
	Conversation, Parent                     convView
	BoundAt, LastActivity, EndedAt           string
	Idle, MaxAge                             string
	IdleDue, MaxAgeDue                       bool
	EndedReason                              string
	Active                                   bool
}

func (c *Console) bindingRow(r binding.Record, now time.Time) bindingRow {
	guild := r.Metadata[GuildMetadataKey]
	row := bindingRow{ID: r.ID, Status: string(r.Status), Kind: string(r.TargetKind), Label: r.Label, BoundBy: r.BoundBy,
		Target: r.TargetSessionKey, Conversation: conversation(r.Conversation, guild),
		BoundAt: c.fmtTime(r.BoundAt), LastActivity: c.fmtTime(r.LastActivityAt), EndedAt: c.fmtTime(r.EndedAt),
		EndedReason: r.EndedReason, Active: isActive(r)}
	if r.Conversation.ParentConversationID != "" {
		row.Parent = conversation(binding.ConversationRef{Channel: r.Conversation.Channel, ConversationID: r.Conversation.ParentConversationID}, guild)
	}
	if row.Active {
		row.Idle, row.IdleDue = countdown(r.LastActivityAt.Add(r.IdleTimeout), now, r.IdleTimeout > 0)
		row.MaxAge, row.MaxAgeDue = countdown(r.BoundAt.Add(r.MaxAge), now, r.MaxAge > 0)
	} else {
		row.Idle, row.MaxAge = "—", "—"
	}
	return row
}

type bindingsPage struct {
	base
	Status        string
	Active, Ended int
	Rows          []bindingRow
	Pager         pager
	Filters       []filterLink
}

type filterLink struct {
	Label, URL string
	On         bool
}

func (c *Console) bindings(r *http.Request) (any, error) {
	page, err := pageParam(r)
	if err != nil {
		return nil, err
	}
	status := r.URL.Query().Get("status")
	if status != "" && status != "active" && status != "ended" {
		return nil, badRequest("status %q: use active or ended", status)
	}
	recs, err := c.allBindings(r.Context())
	if err != nil {
		return nil, err
	}
	// recs is sorted active first: the active ones are a prefix.
	active, _ := slices.BinarySearchFunc(recs, false, func(r binding.Record, _ bool) int {
		if isActive(r) {
			return -1
		}
		return 1
	})
	sel := recs
	switch status {
	case "active":
		sel = recs[:active]
	case "ended":
		sel = recs[active:]
	}
	lo, hi, pg := paginate(page, c.o.PageSize, len(sel), func(n int) string {
		return query("/bindings", "status", status, "page", strconv.Itoa(n))
	})
	now := c.o.Now()
	p := bindingsPage{base: c.base("bindings", "Bindings"), Status: status, Active: active, Ended: len(recs) - active, Pager: pg}
	for _, rec := range sel[lo:hi] {
		p.Rows = append(p.Rows, c.bindingRow(rec, now))
	}
	for _, f := range []struct{ label, v string }{{"all", ""}, {"active", "active"}, {"ended", "ended"}} {
		p.Filters = append(p.Filters, filterLink{Label: f.label, URL: query("/bindings", "status", f.v), On: f.v == status})
	}
	return p, nil
}
