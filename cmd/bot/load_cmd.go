package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/agentbot/agentbot/internal/load"
	"github.com/rs/zerolog"
)

// cmdLoad is `bot load`: run a load profile against the built-in emulator
// and print the table.
func cmdLoad(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	profile := fs.String("profile", "standard", "standard | saturation | hot429 | deadmodel | memory | custom | guilds | store")
	conv := fs.Int("conversations", 500, "custom: conversations")
	guilds := fs.Int("guilds", 25, "custom: guilds")
	rate := fs.Float64("rate", 100, "custom: turns offered per second")
	dur := fs.Duration("duration", 20*time.Second, "measured window per run")
	modelLat := fs.Duration("model-latency", 0, "custom: the stand-in model's time per call")
	cpuOut := fs.String("cpuprofile", "", "write a CPU profile of the first run's measured window")
	memOut := fs.String("memprofile", "", "write a heap (allocs) profile after the first run")
	verbose := fs.Bool("v", false, "show the bot's warnings")
	scaleGuilds := fs.Int("scale-guilds", 2500, "guilds: guilds announced by GUILD_CREATE")
	scaleChannels := fs.Int("scale-channels", 40, "guilds: text channels per guild")
	scaleRoles := fs.Int("scale-roles", 50, "guilds: roles per guild")
	bindings := fs.Int("bindings", 100_000, "store: thread bindings in the store")
	entries := fs.Int("entries", 1_000_000, "store: transcript entries in the store")
	cacheDir := fs.String("cache", ".cache/load", "store: where the generated store is kept between runs")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	log := zerolog.Nop()
	if *verbose {
		log = zerolog.New(stderr).Level(zerolog.WarnLevel)
	}
	switch *profile {
	case "guilds", "store":
		var res load.ScaleResult
		stop, err := startCPUProfile(*cpuOut)
		if err != nil {
			fmt.Fprintln(stderr, "bot load:", err)
			return exitProblems
		}
		defer stop()
		if *profile == "guilds" {
			res, err = load.GuildScale(ctx, *scaleGuilds, *scaleChannels, *scaleRoles, log)
		} else {
			res, err = load.StoreScale(ctx, *cacheDir, *bindings, *entries, log, stderr)
		}
		if err != nil {
			fmt.Fprintln(stderr, "bot load:", err)
			return exitProblems
		}
		if *memOut != "" {
			fmt.Fprintln(stderr, "bot load: -memprofile applies to the turn profiles (guilds: LOAD_HEAPPROFILE=FILE)")
		}
		load.PrintScaleTable(stdout, []load.ScaleResult{res})
		return exitOK
	}
	ps, ok := loadProfiles(*profile, *conv, *guilds, *rate, *dur, *modelLat)
	if !ok {
		fmt.Fprintf(stderr, "bot load: unknown profile %q\n", *profile)
		return exitUsage
	}
	if *memOut != "" {
		runtime.MemProfileRate = 64 << 10
	}
	var results []load.Result
	for i, p := range ps {
		var cpu io.Writer
		if i == 0 && *cpuOut != "" {
			f, err := os.Create(*cpuOut)
			if err != nil {
				fmt.Fprintln(stderr, "bot load:", err)
				return exitProblems
			}
			defer f.Close()
			cpu = f
		}
		res, err := load.Run(ctx, p, log, cpu)
		if err != nil {
			fmt.Fprintln(stderr, "bot load:", err)
			return exitProblems
		}
		if i == 0 && *memOut != "" {
			f, err := os.Create(*memOut)
			if err != nil {
				fmt.Fprintln(stderr, "bot load:", err)
				return exitProblems
			}
			if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
				fmt.Fprintln(stderr, "bot load:", err)
			}
			f.Close()
		}
		results = append(results, res)
		if *profile == "saturation" && res.TurnsPerSec < 0.8*p.Rate {
			break // saturated: it no longer keeps up with the offered rate
		}
	}
	load.PrintTable(stdout, results)
	return exitOK
}

// loadProfiles are the runs of the turn profile name (custom: of the
// flags' shape); ok is false for an unknown name.
func loadProfiles(name string, conv, guilds int, rate float64, dur, modelLat time.Duration) (ps []load.Profile, ok bool) {
	switch name {
	case "standard":
		return load.StandardProfiles(dur), true
	case "saturation":
		for _, r := range []float64{100, 200, 300, 400, 500, 750} {
			ps = append(ps, load.Profile{Name: fmt.Sprintf("saturation@%.0f", r), Conversations: 500, Guilds: 25, Rate: r, Duration: dur})
		}
		return ps, true
	case "hot429":
		return []load.Profile{
			{Name: "baseline", Conversations: 500, Guilds: 25, Rate: 100, Duration: dur},
			{Name: "one-channel-429", Conversations: 500, Guilds: 25, Rate: 100, Duration: dur, Hot429: true},
		}, true
	case "deadmodel":
		return []load.Profile{
			{Name: "baseline", Conversations: 500, Guilds: 25, Rate: 100, Duration: dur},
			{Name: "dead-primary-1s", Conversations: 500, Guilds: 25, Rate: 100, Duration: dur, DeadPrimary: time.Second},
		}, true
	case "usage":
		// Issue 30's measure: usage accounting's cost at the standard
		// shape, on and off in A-B-B-A order (a drift of the machine
		// weighs on both alike).
		on := load.Profile{Name: "usage-on", Conversations: 500, Guilds: 25, Rate: 100, Duration: dur}
		off := on
		off.Name, off.NoUsage = "usage-off", true
		return []load.Profile{on, off, off, on}, true
	case "memory":
		return []load.Profile{
			{Name: "memory-off", Conversations: 500, Guilds: 25, Rate: 100, Duration: dur},
			{Name: "memory-on", Conversations: 500, Guilds: 25, Rate: 100, Duration: dur, Memory: true},
		}, true
	case "custom":
		return []load.Profile{{Name: "custom", Conversations: conv, Guilds: guilds, Rate: rate, Duration: dur, ModelLatency: modelLat}}, true
	}
	return nil, false
}

// startCPUProfile profiles the process into path until stop ("": no profile).
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
