package console

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/agentbot/agentbot/core/delivery"
)

var deliveryStates = []delivery.PendingState{delivery.StatePending, delivery.StateSent, delivery.StateDelivered, delivery.StateFailed, delivery.StateSkipped}

type deliveryRow struct {
	ID, State, Source, Session, Reason, Error, Text, Messages string
	Target                                                    convView
	Created, Updated                                          string
	Bad                                                       bool // failed or still pending/sent
	// Warn is the Rule 1 exception of a delivered record ("" when none):
	// displayed, and no transcript holds it.
	Warn string
}

func (c *Console) deliveryRow(r delivery.Record) deliveryRow {
	return deliveryRow{ID: r.Delivery.ID, State: string(r.State), Source: string(r.Delivery.Producer.Source), Session: r.SessionKey,
		Reason: r.Reason, Error: r.Error, Text: preview(r.Delivery.Text, 140), Messages: strings.Join(r.MessageIDs, ", "),
		Target: conversation(r.Delivery.Target, ""), Created: c.fmtTime(r.CreatedAt), Updated: c.fmtTime(r.UpdatedAt),
		Bad: r.State == delivery.StateFailed || r.State == delivery.StatePending || r.State == delivery.StateSent, Warn: warnText(r)}
}

// warnText describes a delivery's Rule 1 exception, if it is one.
func warnText(r delivery.Record) string {
	d, ok := delivery.RecordDiagnostic(r)
	if !ok {
		return ""
	}
	return d.Level + ": " + d.Detail
}

type deliveriesPage struct {
	base
	State, Reason string
	States        []filterLink
	Rows          []deliveryRow
	Pager         pager
	Scanned       int
	Capped        bool
}

func (c *Console) deliveries(r *http.Request) (any, error) {
	page, err := pageParam(r)
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	state := delivery.PendingState(q.Get("state"))
	if state != "" && !slices.Contains(deliveryStates, state) {
		return nil, badRequest("state %q: use pending, sent, delivered, failed or skipped", state)
	}
	reason := strings.TrimSpace(q.Get("reason"))
	size := c.o.PageSize
	p := deliveriesPage{base: c.base("deliveries", "Deliveries"), State: string(state), Reason: reason}
	for _, s := range append([]delivery.PendingState{""}, deliveryStates...) {
		label := string(s)
		if s == "" {
			label = "all"
		}
		p.States = append(p.States, filterLink{Label: label, URL: query("/deliveries", "state", string(s), "reason", reason), On: s == state})
	}
	link := func(n int) string {
		return query("/deliveries", "state", string(state), "reason", reason, "page", strconv.Itoa(n))
	}
	var recs []delivery.Record
	if reason == "" {
		// Read only up to this page (plus one row to know there is more).
		recs, err = c.o.Store.Deliveries(r.Context(), state, page*size+1)
		if err != nil {
			return nil, err
		}
		total := len(recs)
		lo, hi, pg := paginate(page, size, total, link)
		if total > page*size { // more beyond: the exact total is unknown
			pg.Total, pg.Pages = -1, page+1
		}
		p.Pager = pg
		for _, rec := range recs[lo:hi] {
			p.Rows = append(p.Rows, c.deliveryRow(rec))
		}
		return p, nil
	}
	recs, err = c.o.Store.Deliveries(r.Context(), state, reasonScanCap)
	if err != nil {
		return nil, err
	}
	p.Scanned, p.Capped = len(recs), len(recs) >= reasonScanCap
	needle := strings.ToLower(reason)
	var sel []delivery.Record
	for _, rec := range recs {
		if strings.Contains(strings.ToLower(rec.Reason), needle) || strings.Contains(strings.ToLower(rec.Error), needle) {
			sel = append(sel, rec)
		}
	}
	lo, hi, pg := paginate(page, size, len(sel), link)
	p.Pager = pg
	for _, rec := range sel[lo:hi] {
		p.Rows = append(p.Rows, c.deliveryRow(rec))
	}
	return p, nil
}
