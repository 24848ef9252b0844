package config

import (
	"strings"
	"testing"
)

func TestMemoryConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		yaml           string
		enabled, notes bool
		err            string
	}{
		{yaml: "", enabled: false},
		{yaml: "memory: {enabled: true}\n", enabled: true, notes: true},
		{yaml: "memory:\n  enabled: false\n", enabled: false},
		{yaml: "memory: {enabeld: true}\n", err: "memory.enabeld"},
		{yaml: "memory: {enabled: yes please}\n", err: "memory.enabled"},
		{yaml: "memory: {enabled: true, notes: true}\n", enabled: true, notes: true},
		{yaml: "memory: {enabled: true, notes: false}\n", enabled: true, notes: false},
		{yaml: "memory: {enabled: false, notes: true}\n", enabled: false, notes: false},
		{yaml: "memory: {enabled: true, notes: maybe}\n", err: "memory.notes"},
	} {
		cfg, err := LoadBytes("t.yaml", []byte(tc.yaml), envOf(nil))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err = %v, want one naming %s", tc.yaml, err, tc.err)
			}
			continue
		}
		if err != nil || cfg.Memory.Enabled != tc.enabled || cfg.Memory.NotesOn() != tc.notes {
			t.Errorf("%q: enabled, notes = %v, %v, %v; want %v, %v", tc.yaml, cfg != nil && cfg.Memory.Enabled, cfg != nil && cfg.Memory.NotesOn(), err, tc.enabled, tc.notes)
		}
	}
}
