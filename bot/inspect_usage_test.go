package bot

import (
	"testing"
	"time"
)

func TestParseSince(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"7d", 7 * 24 * time.Hour, true}, {"1d", 24 * time.Hour, true}, {"36h", 36 * time.Hour, true}, {"90m", 90 * time.Minute, true},
		{"0d", 0, false}, {"-1d", 0, false}, {"d", 0, false}, {"week", 0, false}, {"-5h", 0, false}, {"", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseSince(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseSince(%q) = %v, %v; want %v (ok %v)", tt.in, got, err, tt.want, tt.ok)
		}
	}
}
