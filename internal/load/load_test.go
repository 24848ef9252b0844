package load

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// TestLoadSmoke runs the load harness's smallest profile: every message
// offered gets exactly one measured reply and the figures are filled in.
// It asserts counts, never a time (`make load` is where figures come from).
func TestLoadSmoke(t *testing.T) {
	t.Parallel()
	p := Profile{Name: "smoke", Conversations: 4, Guilds: 2, Rate: 40, Duration: 300 * time.Millisecond}
	res, err := Run(t.Context(), p, zerolog.Nop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Offered == 0 || res.Turns != res.Offered || res.Lost != 0 {
		t.Fatalf("offered %d, measured %d, lost %d: want every offered turn measured once", res.Offered, res.Turns, res.Lost)
	}
	if res.CPUPerTurn <= 0 || res.AllocsPerTurn <= 0 || res.HeapInuse == 0 {
		t.Fatalf("figures missing: %+v", res)
	}
	if res.P50 > res.P99 || res.P99 > res.Max {
		t.Fatalf("percentiles out of order: %+v", res)
	}
}

// TestGuildScaleSmoke: the GUILD_CREATE scenario on a tiny world answers in
// the last guild.
func TestGuildScaleSmoke(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	res, err := GuildScale(ctx, 3, 2, 2, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if res.Serving <= 0 {
		t.Fatalf("no serving time: %+v", res)
	}
}
