package scheduler_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbot/agentbot/scheduler"
)

// refuseJobs is an Authorizer refusing the listed job ids.
type refuseJobs struct {
	mu     sync.Mutex
	refuse map[string]bool
	asked  []string
}

func (r *refuseJobs) AuthorizeRun(_ context.Context, j scheduler.Job) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, j.ID+"/"+j.CreatedBy)
	if r.refuse[j.ID] {
		return errors.New("the creator cannot view the target")
	}
	return nil
}

// Before every run the Authorizer is asked (invariant 13: the creator is
// re-checked at run time); a refused run runs and posts nothing and fails
// with the reason. An allowed in-chat run hands the creator to the turn.
func TestAuthorizerGatesEveryRun(t *testing.T) {
	t.Parallel()
	auth := &refuseJobs{refuse: map[string]bool{}}
	e := newEnv(t)
	e.auth = auth
	e.s = e.newScheduler()
	inChat := e.add(scheduler.AddRequest{Schedule: "every 1h", Target: "main", CreatedBy: "alice"})
	bg := e.add(scheduler.AddRequest{Schedule: "every 1h", Target: "isolated", CreatedBy: "alice"})
	auth.refuse[bg.ID] = true
	e.clk.Advance(time.Hour)
	e.tick()
	if runs := e.chat.runs(); len(runs) != 1 || runs[0].JobID != inChat.ID || runs[0].CreatedBy != "alice" {
		t.Fatalf("in-chat runs = %+v, want one for %s carrying its creator", runs, inChat.ID)
	}
	if n := len(e.bg.runs()); n != 0 {
		t.Fatalf("%d background runs of a refused job", n)
	}
	if n := len(e.out.deliveries()); n != 0 {
		t.Fatalf("%d deliveries of a refused job", n)
	}
	rs := e.runs(bg.ID)
	if len(rs) != 1 || rs[0].Status != scheduler.StatusError || !strings.Contains(rs[0].Error, "not authorized: the creator cannot view the target") ||
		rs[0].Delivery.Status != scheduler.DeliveryNotRequested {
		t.Fatalf("refused run = %+v", rs)
	}
}
