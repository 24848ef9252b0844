package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbot/agentbot/acp/acptest"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/store/bolt"
)

// seedDeliveries writes n records of state created at.
func seedDeliveries(t *testing.T, st *bolt.Store, prefix string, n int, state delivery.PendingState, at time.Time) {
	t.Helper()
	for i := range n {
		r := delivery.Record{Delivery: delivery.Delivery{ID: fmt.Sprintf("%s-%d", prefix, i), Text: "a reply"}, State: state, CreatedAt: at, UpdatedAt: at}
		if err := st.PutDelivery(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCLIDoctorReportsStoreSizeAndDeliveryRetention(t *testing.T) {
	t.Parallel()
	cfg, storePath := cliConfig(t, "")
	now := time.Now()
	cliSeed(t, storePath, func(st *bolt.Store) {
		seedDeliveries(t, st, "old", 3, delivery.StateDelivered, now.Add(-40*24*time.Hour))
		seedDeliveries(t, st, "oldfailed", 1, delivery.StateFailed, now.Add(-31*24*time.Hour))
		seedDeliveries(t, st, "oldpending", 2, delivery.StatePending, now.Add(-40*24*time.Hour)) // never pruned
		seedDeliveries(t, st, "new", 5, delivery.StateDelivered, now.Add(-time.Hour))
	})
	code, out, errOut := cliRun(t, "doctor", "-config", cfg)
	if code != 0 {
		t.Fatalf("doctor: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"✔ store size ", "delivery retention (30 days) would free 4 record(s)"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
	st, err := bolt.Open(storePath, bolt.Options{LockTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if all, _ := st.Deliveries(t.Context(), "", 0); len(all) != 11 {
		t.Fatalf("doctor deleted records: %d left, want 11", len(all))
	}
}

// bot doctor starts each ACP agent once and runs initialize.
func TestCLIDoctorProbesACPAgents(t *testing.T) {
	t.Parallel()
	bin := acptest.Build(t)
	cfg, _ := cliConfig(t, "acp:\n  agents:\n    good:\n      command: "+bin+"\n      args: [-load]\n      workspace: "+t.TempDir()+
		"\n    broken:\n      command: "+filepath.Join(t.TempDir(), "missing")+"\n      workspace: "+t.TempDir()+"\n")
	code, out, errOut := cliRun(t, "doctor", "-config", cfg)
	if code != 1 {
		t.Fatalf("doctor: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"✔ acp agent good: started and answered initialize (resumes sessions with session/load)", "✘ acp agent broken: start agent"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
}
