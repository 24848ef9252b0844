package console

import (
	"time"
)

// Limits on what one request reads.
const (
	failuresShown   = 10
	runsPerJob      = 5
	hourScanCap     = 5000  // deliveries read to count the last hour
	reasonScanCap   = 10000 // deliveries read when filtering by reason
	sessionScanCap  = 2000  // newest deliveries searched for a conversation's
	stateScanCap    = 500   // failed/pending deliveries searched for a conversation's
	conversationCap = 100   // deliveries listed beside a transcript
	lateGrace       = time.Minute
)

// GuildMetadataKey is the binding metadata key that, when set, lets the
// console link a conversation to https://discord.com/channels/<guild>/<id>.
const GuildMetadataKey = "guildId"

type base struct {
	Title string
	Nav   string
	Now   string
	Zone  string
}

func (c *Console) base(nav, title string) base {
	return base{Title: title, Nav: nav, Now: c.fmtTime(c.o.Now()), Zone: c.o.Location.String()}
}

type errorPage struct {
	base
	Status  int
	Message string
}
