package bot

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/memory"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/core/sessionkey"
	"github.com/agentbot/agentbot/scheduler"
)

// recallOwners says whose subagent and job-run sessions are, for recall
// (memory.Owners): a subagent's spawner, shown in its thread (else the
// conversation that asked); a background job run's creator, shown where the
// job posts. Read from the store per search, so a record's end is seen at
// once; a session whose record is gone is nobody's.
type recallOwners struct {
	st interface {
		session.Store
		Job(ctx context.Context, id string) (scheduler.Job, bool, error)
	}
}

func (o recallOwners) Owners(ctx context.Context, keys []string) (map[string]memory.Owner, error) {
	out := make(map[string]memory.Owner, len(keys))
	var infos map[string]session.Info
	jobs := map[string]*scheduler.Job{}
	for _, key := range keys {
		switch sessionkey.KindOf(key) {
		case sessionkey.KindSubagent:
			if infos == nil {
				all, err := o.st.SessionInfos(ctx)
				if err != nil {
					return nil, fmt.Errorf("session records: %w", err)
				}
				infos = make(map[string]session.Info, len(all))
				for _, in := range all {
					infos[in.Key] = in
				}
			}
			if in, ok := infos[key]; ok {
				out[key] = subagentOwner(in)
			}
		case sessionkey.KindJobRun:
			id, ok := jobOfRun(key)
			if !ok {
				continue
			}
			j, seen := jobs[id]
			if !seen {
				got, found, err := o.st.Job(ctx, id)
				if err != nil {
					return nil, fmt.Errorf("job %s: %w", id, err)
				}
				if found {
					j = &got
				}
				jobs[id] = j
			}
			if j == nil {
				continue
			}
			own := memory.Owner{User: j.CreatedBy}
			if to, err := scheduler.DeliveryTarget(*j); err == nil {
				own.Shown = []binding.ConversationRef{to}
			}
			out[key] = own
		}
	}
	return out, nil
}

// subagentOwner: the spawner; shown in its thread, else the requester.
func subagentOwner(in session.Info) memory.Owner {
	own := memory.Owner{User: in.SpawnedBy}
	req := in.Requester.Normalize()
	switch {
	case in.Thread != "":
		parent := req.ConversationID
		if req.ParentConversationID != "" {
			parent = req.ParentConversationID
		}
		own.Shown = []binding.ConversationRef{binding.ConversationRef{Channel: req.Channel, AccountID: req.AccountID,
			ConversationID: in.Thread, ParentConversationID: parent}.Normalize()}
	case req.Valid():
		own.Shown = []binding.ConversationRef{req}
	}
	return own
}

// jobOfRun is the job id of a job run's session key
// (sessionkey.CronRun: agent:<agent>:cron:<job>:run:<run>).
func jobOfRun(key string) (string, bool) {
	p := strings.Split(key, ":")
	if len(p) != 6 || p[2] != "cron" || p[4] != "run" || p[3] == "" {
		return "", false
	}
	return p[3], true
}
