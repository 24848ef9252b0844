package metrics_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentbot/agentbot/metrics"
)

// TestRule1ExceptionsByReason: the exception counter is labelled by reason only.
func TestRule1ExceptionsByReason(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, func() float64 { return 0 })
	m.Rule1Exception("bound-to-other-agent")
	m.Rule1Exception("bound-to-other-agent")
	m.Rule1Exception("native-only")
	var nilM *metrics.Metrics
	nilM.Rule1Exception("native-only") // a nil *Metrics records nothing
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "agentbot_rule1_exceptions_total" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			if len(mt.GetLabel()) != 1 || mt.GetLabel()[0].GetName() != "reason" {
				t.Fatalf("labels %v", mt.GetLabel())
			}
			got[mt.GetLabel()[0].GetValue()] = mt.GetCounter().GetValue()
		}
	}
	if len(got) != 2 || got["bound-to-other-agent"] != 2 || got["native-only"] != 1 {
		t.Fatalf("agentbot_rule1_exceptions_total = %v", got)
	}
}

// TestCommandCounters: started, killed by reason, and the running gauge.
func TestCommandCounters(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, func() float64 { return 0 })
	for range 3 {
		m.CommandStarted()
	}
	m.CommandEnded("")
	m.CommandEnded("timeout")
	var nilM *metrics.Metrics
	nilM.CommandStarted()
	nilM.CommandEnded("killed")
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range mt.GetLabel() {
				name += "/" + l.GetValue()
			}
			got[name] = mt.GetCounter().GetValue() + mt.GetGauge().GetValue()
		}
	}
	want := map[string]float64{"agentbot_acp_commands_started_total": 3, "agentbot_acp_commands_killed_total/timeout": 1, "agentbot_acp_commands_running": 1}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if _, ok := got["agentbot_acp_commands_killed_total/"]; ok {
		t.Error("a command that exited by itself counted as killed")
	}
}
