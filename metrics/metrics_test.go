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
