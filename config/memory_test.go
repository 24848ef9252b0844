package config

import (
	"strings"
	"testing"
)

func TestMemoryConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		yaml    string
		enabled bool
		err     string
	}{
		{yaml: "", enabled: false},
		{yaml: "memory: {enabled: true}\n", enabled: true},
		{yaml: "memory:\n  enabled: false\n", enabled: false},
		{yaml: "memory: {enabeld: true}\n", err: "memory.enabeld"},
		{yaml: "memory: {enabled: yes please}\n", err: "memory.enabled"},
	} {
		cfg, err := LoadBytes("t.yaml", []byte(tc.yaml), envOf(nil))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err = %v, want one naming %s", tc.yaml, err, tc.err)
			}
			continue
		}
		if err != nil || cfg.Memory.Enabled != tc.enabled {
			t.Errorf("%q: enabled = %v, %v; want %v", tc.yaml, cfg != nil && cfg.Memory.Enabled, err, tc.enabled)
		}
	}
}
