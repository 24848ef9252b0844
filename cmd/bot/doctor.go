package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/agentbot/agentbot/bot"
	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/session"
	"github.com/agentbot/agentbot/scheduler"
	"github.com/agentbot/agentbot/store/bolt"
)

// cmdDoctor validates the config and the store: jobs whose stored mode
// breaks Rule 2 (fixed with -fix, each listed with what it loses) and
// bindings that point at ended sessions. With -live, also what the bot may
// do on Discord (discord.Checker). Exit 0 healthy, 1 problems remain.
func cmdDoctor(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fix := fs.Bool("fix", false, "apply the job migrations")
	live := fs.Bool("live", false, "also ask Discord what the bot may do in each served server and channel")
	cfg, code := loadConfig(fs, args, stderr)
	if cfg == nil {
		return code
	}
	fmt.Fprintln(stdout, "✔ config is valid")
	problems := bot.DoctorACP(ctx, cfg, stdout)
	problems += bot.DoctorMCP(ctx, cfg, stdout)
	problems += bot.DoctorEmbeddings(ctx, cfg, stdout)
	if *live {
		if err := cfg.ValidateForRun(); err != nil {
			fmt.Fprintln(stderr, "bot:", err)
			return exitUsage
		}
		found, err := bot.LiveFindings(ctx, cfg, nil)
		if err != nil {
			fmt.Fprintln(stderr, "bot: live check:", err)
			return exitProblems
		}
		if len(found) == 0 {
			fmt.Fprintln(stdout, "✔ Discord: the token, the Message Content intent and every permission the config needs, in every served channel")
		} else {
			problems += bot.PrintFindings(stdout, found)
		}
	}
	st, err := bot.OpenStore(ctx, cfg.Store, time.Second)
	if *live && errors.Is(err, bolt.ErrLocked) {
		fmt.Fprintln(stdout, "⚠ store is locked by the running bot: store checks skipped (stop it, or use bot inspect)")
		return doctorExit(stdout, problems)
	}
	if err != nil {
		fmt.Fprintln(stderr, "bot:", err)
		return exitUsage
	}
	defer st.Close()
	fmt.Fprintf(stdout, "✔ store %s opened\n", bot.StoreLabel(cfg.Store, st))
	if err := storeGrowth(ctx, cfg.Store, st, time.Now(), stdout); err != nil {
		fmt.Fprintln(stderr, "bot: store size:", err)
		return exitProblems
	}
	if err := recallReport(ctx, cfg, st, time.Now(), stdout); err != nil {
		fmt.Fprintln(stderr, "bot: recall index:", err)
		return exitProblems
	}

	findings, err := scheduler.Diagnose(ctx, st)
	if err != nil {
		fmt.Fprintln(stderr, "bot: diagnose jobs:", err)
		return exitProblems
	}
	if *fix && len(findings) > 0 {
		if findings, err = scheduler.Fix(ctx, st); err != nil {
			fmt.Fprintln(stderr, "bot: fix jobs:", err)
			return exitProblems
		}
		for _, f := range findings {
			fmt.Fprintf(stdout, "✔ job %s (%s): %s — fixed: %s\n", f.JobID, f.JobName, f.Problem, f.Fix)
			if f.Warning != "" {
				fmt.Fprintf(stdout, "  ⚠ %s\n", f.Warning)
			}
			if f.Fix == "" {
				problems++
			}
		}
	} else {
		for _, f := range findings {
			problems++
			fmt.Fprintf(stdout, "✘ job %s (%s): %s\n", f.JobID, f.JobName, f.Problem)
			if f.Fix != "" {
				fmt.Fprintf(stdout, "  bot doctor -fix would: %s\n", f.Fix)
			}
			if f.Warning != "" {
				fmt.Fprintf(stdout, "  ⚠ %s\n", f.Warning)
			}
		}
	}
	n, err := staleBindings(ctx, st, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "bot: check bindings:", err)
		return exitProblems
	}
	problems += n
	return doctorExit(stdout, problems)
}

func doctorExit(stdout io.Writer, problems int) int {
	if problems > 0 {
		fmt.Fprintf(stdout, "%d problem(s) remain\n", problems)
		return exitProblems
	}
	fmt.Fprintln(stdout, "✔ healthy")
	return exitOK
}

// staleBindings reports active bindings whose target subagent has ended
// (they route messages to a session that will not answer as expected).
func staleBindings(ctx context.Context, st bot.Store, w io.Writer) (int, error) {
	infos, err := st.SessionInfos(ctx)
	if err != nil {
		return 0, err
	}
	ended := map[string]session.Status{}
	for _, in := range infos {
		if in.Kind == session.KindSubagent && in.Status != session.StatusRunning {
			ended[in.Key] = in.Status
		}
	}
	recs, err := st.Bindings(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range recs {
		if r.Status != binding.StatusActive {
			continue
		}
		if status, ok := ended[r.TargetSessionKey]; ok && status == session.StatusUndeliver {
			n++
			fmt.Fprintf(w, "✘ binding %s (conversation %s) points at subagent %s whose result could not be delivered; end it with /unfocus there\n",
				r.ID, r.Conversation.ConversationID, r.TargetSessionKey)
		}
	}
	return n, nil
}

// storeGrowth reports the store file's size and what delivery retention
// frees (store.deliveryRetentionDays): it never deletes anything itself.
func storeGrowth(ctx context.Context, cfg config.StoreConfig, st bot.Store, now time.Time, w io.Writer) error {
	b, ok := st.(*bolt.Store)
	if !ok {
		return nil // PostgreSQL: its own tools report table sizes; no retention yet
	}
	size, err := b.FileSize()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "✔ store size %s\n", humanBytes(size))
	days := cfg.DeliveryRetentionDays
	if days == 0 {
		n, err := b.PruneDeliveries(ctx, now, true)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "  store.deliveryRetentionDays is 0: %d finished delivery record(s) (%s) are kept forever\n", n.Rows, humanBytes(n.Bytes))
		return nil
	}
	n, err := b.PruneDeliveries(ctx, now.Add(-cfg.DeliveryRetention()), true)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "  delivery retention (%d days) would free %d record(s), %s (the running bot deletes them hourly; `bot compact` returns freed pages to the disk)\n",
		days, n.Rows, humanBytes(n.Bytes))
	return nil
}

// humanBytes formats n in KiB/MiB/GiB.
func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
