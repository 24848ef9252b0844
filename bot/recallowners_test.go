package bot

import (
	"context"
	"testing"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/core/sessionkey"
	"github.com/agentbot/agentbot/scheduler"
	storemem "github.com/agentbot/agentbot/store/memory"
)

// ownersStore is the store's session records and jobs.
type ownersStore struct {
	*storemem.Sessions
	*storemem.Store
}

func (o ownersStore) PutSessionInfo(ctx context.Context, in session.Info) error {
	return o.Sessions.PutSessionInfo(ctx, in)
}

func (o ownersStore) SessionInfos(ctx context.Context) ([]session.Info, error) {
	return o.Sessions.SessionInfos(ctx)
}

// TestRecallOwners: a subagent is its spawner's, shown in its thread (else
// where it was asked for); a background job run is its creator's, shown
// where the job posts; a session whose record is gone is nobody's.
func TestRecallOwners(t *testing.T) {
	ctx := t.Context()
	st := ownersStore{storemem.NewSessions(), storemem.New()}
	general := binding.ConversationRef{Channel: "discord", AccountID: "acct", ConversationID: "general"}
	threaded := sessionkey.Subagent("main", "s1")
	plain := sessionkey.Subagent("main", "s2")
	for _, in := range []session.Info{
		{Key: threaded, Kind: session.KindSubagent, SpawnedBy: "carol", Requester: general, Thread: "t1"},
		{Key: plain, Kind: session.KindSubagent, SpawnedBy: "dave", Requester: general},
	} {
		if err := st.PutSessionInfo(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.PutJob(ctx, scheduler.Job{ID: "j1", CreatedBy: "alice", To: "channel:1234567890123", CreatedIn: general, Target: "isolated", StoredMode: scheduler.ModeBackground}); err != nil {
		t.Fatal(err)
	}
	run := sessionkey.CronRun("main", "j1", "r1")
	gone := sessionkey.CronRun("main", "j9", "r1")
	got, err := recallOwners{st}.Owners(ctx, []string{threaded, plain, run, gone, sessionkey.Subagent("main", "s9")})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct{ user, shown, parent string }{
		threaded: {"carol", "t1", "general"},
		plain:    {"dave", "general", ""},
		run:      {"alice", "1234567890123", ""},
	}
	if len(got) != len(want) {
		t.Fatalf("owners = %+v; want %d (none for the sessions whose record is gone)", got, len(want))
	}
	for key, w := range want {
		o := got[key]
		if o.User != w.user || len(o.Shown) != 1 || o.Shown[0].ConversationID != w.shown || o.Shown[0].ParentConversationID != w.parent {
			t.Errorf("owner of %s = %+v; want %s shown in %s (parent %q)", key, o, w.user, w.shown, w.parent)
		}
	}
}
