package config

import (
	"strings"
	"testing"
)

func TestShardConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		yaml      string
		wantErr   string // "" = valid
		wantID    int
		wantCount int
		wantAuto  bool
	}{
		{"default is unsharded", "", "", 0, 1, false},
		{"explicit", "discord:\n  shard: {id: 1, count: 2}\n", "", 1, 2, false},
		{"count only", "discord:\n  shard:\n    count: 4\n", "", 0, 4, false},
		{"auto", "discord:\n  shard: {id: 3, count: auto}\n", "", 3, 0, true},
		{"count from env", "discord:\n  shard: {id: 1, count: \"${SHARDS}\"}\n", "", 1, 3, false},
		{"id equals count", "discord:\n  shard: {id: 2, count: 2}\n",
			"test.yaml:2: discord.shard.id: must be less than discord.shard.count (2): shards are numbered 0 to 1, got 2", 0, 0, false},
		{"id beyond default count", "discord:\n  shard:\n    id: 1\n",
			"test.yaml:3: discord.shard.id: must be less than discord.shard.count (1)", 0, 0, false},
		{"negative id", "discord:\n  shard: {id: -1, count: 2}\n",
			"test.yaml:2: discord.shard.id: must be 0 or more, got -1", 0, 0, false},
		{"negative id with auto", "discord:\n  shard: {id: -1, count: auto}\n",
			"discord.shard.id: must be 0 or more", 0, 0, false},
		{"zero count", "discord:\n  shard: {count: 0}\n",
			`test.yaml:2: discord.shard.count: must be a whole number of at least 1, or "auto" (Discord's recommendation), got "0"`, 0, 0, false},
		{"word count", "discord:\n  shard: {count: many}\n",
			`discord.shard.count: must be a whole number of at least 1, or "auto"`, 0, 0, false},
		{"id not a number", "discord:\n  shard: {id: first}\n",
			`test.yaml:2: discord.shard.id: expected a whole number (e.g. 4), got "first"`, 0, 0, false},
		{"unknown key", "discord:\n  shard: {shards: 2}\n",
			`discord.shard.shards: unknown key`, 0, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := load(t, tc.yaml, map[string]string{"SHARDS": "3"})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			n, auto := cfg.Discord.Shard.Total()
			if cfg.Discord.Shard.ID != tc.wantID || n != tc.wantCount || auto != tc.wantAuto {
				t.Errorf("shard id %d, Total() = %d, %v; want %d, %d, %v", cfg.Discord.Shard.ID, n, auto, tc.wantID, tc.wantCount, tc.wantAuto)
			}
		})
	}
}

func TestShardTotalOfCodeBuiltConfig(t *testing.T) {
	t.Parallel()
	if n, auto := (ShardConfig{}).Total(); n != 1 || auto {
		t.Errorf("zero ShardConfig: Total() = %d, %v; want 1, false", n, auto)
	}
	cfg := Default()
	cfg.Discord.Shard = ShardConfig{ID: 5, Count: "4"}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "discord.shard.id") {
		t.Errorf("Validate() = %v, want a discord.shard.id error", err)
	}
}
