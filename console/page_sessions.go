package console

import (
	"cmp"
	"net/http"
	"strconv"

	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/core/sessionkey"
)

type sessionRow struct {
	Key, Kind, Label, Status string
}

type sessionsPage struct {
	base
	Rows  []sessionRow
	Pager pager
}

func (c *Console) sessions(r *http.Request) (any, error) {
	page, err := pageParam(r)
	if err != nil {
		return nil, err
	}
	keys, err := c.o.Store.Sessions(r.Context())
	if err != nil {
		return nil, err
	}
	infos, err := c.o.Store.SessionInfos(r.Context())
	if err != nil {
		return nil, err
	}
	byKey := make(map[string]session.Info, len(infos))
	for _, in := range infos {
		byKey[in.Key] = in
	}
	lo, hi, pg := paginate(page, c.o.PageSize, len(keys), func(n int) string { return query("/sessions", "page", strconv.Itoa(n)) })
	p := sessionsPage{base: c.base("sessions", "Sessions"), Pager: pg}
	for _, k := range keys[lo:hi] {
		in := byKey[k]
		p.Rows = append(p.Rows, sessionRow{Key: k, Kind: string(cmp.Or(in.Kind, sessionkey.KindOf(k))), Label: in.Label, Status: string(in.Status)})
	}
	return p, nil
}
