package bot

import (
	"bytes"
	"strings"
	"testing"

	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/delivery"
	"github.com/agentbot/agentbot/scheduler"
)

// TestRule1ExceptionIsAVisibleDiagnostic: a background job of agent main
// delivers its result into a thread bound to a subagent of agent
// research. The message is displayed and no transcript gets it (the Rule 1
// exception); that is a warn diagnostic with its reason in the run record
// (`bot inspect runs`), in the metric by reason, and on the outbox record.
func TestRule1ExceptionIsAVisibleDiagnostic(t *testing.T) {
	t.Parallel()
	h := startBot(t, nil, func(c *config.Config) {
		c.Agents = append(c.Agents, config.AgentConfig{ID: "research", Model: c.Agents[0].Model})
	})
	before := len(h.emu.Threads(h.general.ID))
	in := adInvoke(t, h, h.general.ID, "spawn", adOpt("task", "dig"), adOpt("label", "digger"), adOpt("thread", true), adOpt("agent", "research"))
	if r := adResponded(t, h, in); !strings.Contains(r.Content, "Started subagent") {
		t.Fatalf("/spawn answered %q", r.Content)
	}
	var thread string
	waitUntil(t, h, "the research thread and its completion", func() bool {
		ths := h.emu.Threads(h.general.ID)
		if len(ths) <= before {
			return false
		}
		thread = ths[len(ths)-1].ID
		return countContaining(h.emu.Messages(thread), "finished:") == 1
	})
	s := h.app.sched.Scheduler
	j, err := s.Add(t.Context(), scheduler.AddRequest{Name: "report", Schedule: "every 1h", Prompt: "the report", Target: "isolated", To: "channel:" + thread,
		CreatedBy: h.alice.ID, CreatedIn: binding.ConversationRef{Channel: "discord", AccountID: "default", ConversationID: h.general.ID}, AgentID: "main"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.RunNow(t.Context(), j.ID)
	if err != nil || r.Status != scheduler.StatusOK {
		t.Fatalf("run %+v: %v", r, err)
	}
	if len(r.Diagnostics) != 1 || r.Diagnostics[0].Level != "warn" || r.Diagnostics[0].Reason != delivery.SkipOtherAgent {
		t.Fatalf("diagnostics %+v", r.Diagnostics)
	}
	if v := adCounter(h.app.metrics.Rule1Exceptions.WithLabelValues(delivery.SkipOtherAgent)); v != 1 {
		t.Fatalf("agentbot_rule1_exceptions_total{reason=bound-to-other-agent} = %v", v)
	}
	var out bytes.Buffer
	if err := (inspector{store: h.app.store}).write(t.Context(), &out, "runs", []string{j.ID}, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "warn:"+delivery.SkipOtherAgent) {
		t.Fatalf("bot inspect runs:\n%s", out.String())
	}
	finishBot(t, h, h.general.ID)
}
