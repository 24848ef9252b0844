package main

// CLI tests, in-process through run(args, stdout, stderr): the scripting
// contract of `bot inspect ... -json` (DESIGN §4), exit codes, `bot doctor`
// on a store seeded with old-style jobs, `bot run` without a token, and
// `bot demo`.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbot/agentbot/core/binding"
	"github.com/agentbot/agentbot/core/transcript"
	"github.com/agentbot/agentbot/scheduler"
	"github.com/agentbot/agentbot/store/bolt"
)

var cliT0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// cliRun runs the CLI in-process and returns the exit code and outputs.
func cliRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// cliConfig writes a config file into a temp dir: its store is bot.db
// next to it, HTTP is disabled, and extra YAML is appended.
func cliConfig(t *testing.T, extra string) (cfgPath, storePath string) {
	t.Helper()
	dir := t.TempDir()
	storePath = filepath.Join(dir, "bot.db")
	cfgPath = filepath.Join(dir, "config.yaml")
	body := fmt.Sprintf("store:\n  path: %q\nhttp:\n  listen: \"\"\n%s", storePath, extra)
	if err := os.WriteFile(cfgPath, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfgPath, storePath
}

// cliSeed opens the store, lets fill seed it and closes it.
func cliSeed(t *testing.T, storePath string, fill func(st *bolt.Store)) {
	t.Helper()
	st, err := bolt.Open(storePath, bolt.Options{LockTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	fill(st)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}

// jsonLines decodes one JSON object per line.
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var objs []map[string]any
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not one JSON object per line: %q: %v", line, err)
		}
		objs = append(objs, m)
	}
	return objs
}

func requireKeys(t *testing.T, what string, m map[string]any, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			t.Errorf("%s lacks %q: %v", what, k, m)
		}
	}
}

func mustRFC3339(t *testing.T, what string, v any) time.Time {
	t.Helper()
	s, _ := v.(string)
	at, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatalf("%s = %v is not RFC 3339: %v", what, v, err)
	}
	return at
}

func oldStyleJob(id, target, to string) scheduler.Job {
	return scheduler.Job{
		ID: id, Name: "old " + id, AgentID: "main", Prompt: "post the digest", Target: target, To: to, StoredMode: scheduler.ModeInChat,
		Schedule:  scheduler.ScheduleSpec{Kind: scheduler.KindEvery, Every: time.Hour, Anchor: cliT0, TZ: "UTC", Text: "every 1h"},
		CreatedIn: binding.ConversationRef{Channel: "discord", AccountID: "default", ConversationID: "300"}, CreatedAt: cliT0, Enabled: true, State: scheduler.JobState{NextRunAt: cliT0.Add(time.Hour)},
	}
}

func TestCLIInspectTranscriptJSON(t *testing.T) {
	t.Parallel()
	cfg, storePath := cliConfig(t, "")
	key := "agent:main:discord:channel:300"
	cliSeed(t, storePath, func(st *bolt.Store) {
		for _, e := range []transcript.Entry{
			{Role: transcript.RoleUser, Author: "alice", Text: "hello", MessageIDs: []string{"1001"}, Source: transcript.SourceUser, DeliveryID: "in:1001", At: cliT0},
			{Role: transcript.RoleAssistant, Author: "Assistant", Text: "part one" + "part two", MessageIDs: []string{"1002", "1003"}, Source: transcript.SourceTurn, DeliveryID: "turn:1001", At: cliT0.Add(time.Second)},
			{Role: transcript.RoleSystem, Author: "bot", Text: "a note without a message", Source: transcript.SourceNotice, DeliveryID: "n1", Generation: 1, At: cliT0.Add(2 * time.Second)},
		} {
			if _, _, err := st.Append(t.Context(), key, e); err != nil {
				t.Fatal(err)
			}
		}
	})
	code, out, errOut := cliRun(t, "inspect", "transcript", key, "-json", "-config", cfg)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	objs := jsonLines(t, out)
	if len(objs) != 3 {
		t.Fatalf("%d lines:\n%s", len(objs), out)
	}
	for i, o := range objs {
		requireKeys(t, "entry", o, "seq", "role", "author", "text", "messageIds", "source", "deliveryId", "generation", "at")
		mustRFC3339(t, "at", o["at"])
		if i > 0 && o["seq"].(float64) <= objs[i-1]["seq"].(float64) {
			t.Fatalf("not oldest first:\n%s", out)
		}
	}
	if o := objs[0]; o["role"] != "user" || o["author"] != "alice" || o["text"] != "hello" || o["source"] != "user" || o["deliveryId"] != "in:1001" ||
		o["generation"] != 0.0 || fmt.Sprint(o["messageIds"]) != "[1001]" {
		t.Fatalf("entry 0 = %v", o)
	}
	if o := objs[1]; o["role"] != "assistant" || fmt.Sprint(o["messageIds"]) != "[1002 1003]" || o["source"] != "turn" {
		t.Fatalf("entry 1 = %v", o)
	}
	if ids, ok := objs[2]["messageIds"].([]any); !ok || len(ids) != 0 || objs[2]["generation"] != 1.0 || objs[2]["role"] != "system" {
		t.Fatalf("entry 2 (no message ids, generation 1) = %v", objs[2])
	}
	if !strings.Contains(out, `"messageIds":[]`) {
		t.Fatalf("messageIds must be [] when none:\n%s", out)
	}

	// An unknown session key exits 1 with a message on stderr.
	code, out, errOut = cliRun(t, "inspect", "transcript", "agent:main:discord:channel:999", "-json", "-config", cfg)
	if code != 1 || out != "" || !strings.Contains(errOut, "agent:main:discord:channel:999") {
		t.Fatalf("unknown key: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// Flags before the positional argument work too.
	if code, _, errOut := cliRun(t, "inspect", "transcript", "-config", cfg, "-json", key); code != 0 {
		t.Fatalf("flags first: exit %d: %s", code, errOut)
	}
}

func TestCLIInspectBindingsJSON(t *testing.T) {
	t.Parallel()
	cfg, storePath := cliConfig(t, "")
	active := binding.Record{ID: "b1", TargetSessionKey: "agent:main:subagent:s1", TargetKind: binding.TargetKind("subagent"),
		Conversation: binding.ConversationRef{Channel: "discord", AccountID: "default", ConversationID: "401", ParentConversationID: "300"},
		Status:       binding.StatusActive, BoundBy: "u1", BoundAt: cliT0, LastActivityAt: cliT0.Add(time.Minute), IdleTimeout: 24 * time.Hour}
	ended := binding.Record{ID: "b2", TargetSessionKey: "agent:main:discord:channel:300", TargetKind: binding.TargetKind("session"),
		Conversation: binding.ConversationRef{Channel: "discord", AccountID: "default", ConversationID: "402"},
		Status:       binding.Status("ended"), BoundAt: cliT0, LastActivityAt: cliT0, EndedAt: cliT0.Add(time.Hour), EndedReason: "unfocus"}
	cliSeed(t, storePath, func(st *bolt.Store) {
		if err := st.PutBindings(t.Context(), active, ended); err != nil {
			t.Fatal(err)
		}
	})
	code, out, errOut := cliRun(t, "inspect", "bindings", "-json", "-config", cfg)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	objs := jsonLines(t, out)
	if len(objs) != 2 {
		t.Fatalf("lines:\n%s", out)
	}
	byID := map[string]map[string]any{}
	for _, o := range objs {
		requireKeys(t, "binding", o, "bindingId", "targetSessionKey", "targetKind", "conversation", "status", "boundAt", "expiresAt", "lastActivityAt", "endedAt", "endedReason")
		conv, _ := o["conversation"].(map[string]any)
		requireKeys(t, "conversation", conv, "channel", "accountId", "conversationId", "parentConversationId")
		byID[fmt.Sprint(o["bindingId"])] = o
	}
	a, e := byID["b1"], byID["b2"]
	if a == nil || e == nil {
		t.Fatalf("bindings:\n%s", out)
	}
	if a["status"] != "active" || a["targetSessionKey"] != active.TargetSessionKey || a["endedAt"] != nil ||
		!mustRFC3339(t, "expiresAt", a["expiresAt"]).Equal(cliT0.Add(time.Minute+24*time.Hour)) ||
		!mustRFC3339(t, "boundAt", a["boundAt"]).Equal(cliT0) {
		t.Fatalf("active binding = %v", a)
	}
	if c := a["conversation"].(map[string]any); c["channel"] != "discord" || c["accountId"] != "default" || c["conversationId"] != "401" || c["parentConversationId"] != "300" {
		t.Fatalf("conversation = %v", c)
	}
	if e["status"] != "ended" || e["endedReason"] != "unfocus" || e["expiresAt"] != nil ||
		!mustRFC3339(t, "endedAt", e["endedAt"]).Equal(cliT0.Add(time.Hour)) || e["conversation"].(map[string]any)["parentConversationId"] != "" {
		t.Fatalf("ended binding = %v", e)
	}
}

func TestCLIInspectJobsAndRunsJSON(t *testing.T) {
	t.Parallel()
	cfg, storePath := cliConfig(t, "")
	inChat := oldStyleJob("j1", "main", "")
	bg := oldStyleJob("j2", "isolated", "channel:400")
	bg.StoredMode = scheduler.ModeBackground
	bg.Enabled = false
	bg.State.NextRunAt = time.Time{}
	run := scheduler.Run{JobID: "j1", RunID: "20260302T100000Z", Trigger: scheduler.TriggerCatchUp, ScheduledAt: cliT0.Add(time.Hour),
		StartedAt: cliT0.Add(4 * time.Hour), FinishedAt: cliT0.Add(4*time.Hour + time.Second), Status: scheduler.StatusOK, Late: true, LateBy: 3 * time.Hour,
		Delivery:    scheduler.RunDelivery{Status: scheduler.DeliveryDelivered, MessageIDs: []string{"7", "8"}},
		Diagnostics: []scheduler.Diagnostic{{Level: "warn", Reason: "bound-to-other-agent", DeliveryID: "job:j1:run:20260302T100000Z", Detail: "sent, no transcript entry"}}}
	failed := scheduler.Run{JobID: "j2", RunID: "m1", Trigger: scheduler.TriggerManual, StartedAt: cliT0, FinishedAt: cliT0, Status: scheduler.StatusError,
		Error: "delivery failed: 404", Delivery: scheduler.RunDelivery{Status: scheduler.DeliveryFailed, Error: "404"}}
	cliSeed(t, storePath, func(st *bolt.Store) {
		for _, j := range []scheduler.Job{inChat, bg} {
			if err := st.PutJob(t.Context(), j); err != nil {
				t.Fatal(err)
			}
		}
		for _, r := range []scheduler.Run{run, failed} {
			if err := st.PutRun(t.Context(), r, 50); err != nil {
				t.Fatal(err)
			}
		}
	})

	code, out, errOut := cliRun(t, "inspect", "jobs", "-json", "-config", cfg)
	if code != 0 {
		t.Fatalf("jobs: exit %d: %s", code, errOut)
	}
	jobs := jsonLines(t, out)
	if len(jobs) != 2 {
		t.Fatalf("jobs:\n%s", out)
	}
	for _, o := range jobs {
		requireKeys(t, "job", o, "id", "name", "schedule", "prompt", "target", "to", "mode", "enabled", "nextRunAt")
	}
	if o := jobs[0]; o["id"] != "j1" || o["name"] != "old j1" || o["schedule"] != "every 1h" || o["prompt"] != "post the digest" || o["target"] != "main" ||
		o["to"] != "" || o["mode"] != "in-chat" || o["enabled"] != true || !mustRFC3339(t, "nextRunAt", o["nextRunAt"]).Equal(cliT0.Add(time.Hour)) {
		t.Fatalf("job j1 = %v", o)
	}
	if o := jobs[1]; o["id"] != "j2" || o["mode"] != "background" || o["to"] != "channel:400" || o["enabled"] != false || o["nextRunAt"] != nil {
		t.Fatalf("job j2 = %v", o)
	}

	code, out, errOut = cliRun(t, "inspect", "runs", "j1", "-json", "-config", cfg)
	if code != 0 {
		t.Fatalf("runs j1: exit %d: %s", code, errOut)
	}
	runs := jsonLines(t, out)
	if len(runs) != 1 {
		t.Fatalf("runs j1:\n%s", out)
	}
	r := runs[0]
	requireKeys(t, "run", r, "jobId", "runId", "scheduledAt", "startedAt", "finishedAt", "status", "late", "delivery")
	d, _ := r["delivery"].(map[string]any)
	requireKeys(t, "delivery", d, "status", "messageIds", "error")
	if r["jobId"] != "j1" || r["runId"] != run.RunID || r["status"] != "ok" || r["late"] != true ||
		!mustRFC3339(t, "scheduledAt", r["scheduledAt"]).Equal(run.ScheduledAt) || !mustRFC3339(t, "startedAt", r["startedAt"]).Equal(run.StartedAt) ||
		!mustRFC3339(t, "finishedAt", r["finishedAt"]).Equal(run.FinishedAt) || d["status"] != "delivered" || fmt.Sprint(d["messageIds"]) != "[7 8]" {
		t.Fatalf("run = %v", r)
	}
	// Its Rule 1 exception is a warn diagnostic with its reason.
	diags, _ := r["diagnostics"].([]any)
	if len(diags) != 1 {
		t.Fatalf("run diagnostics = %v", r["diagnostics"])
	}
	dg, _ := diags[0].(map[string]any)
	requireKeys(t, "diagnostic", dg, "level", "reason", "deliveryId", "detail")
	if dg["level"] != "warn" || dg["reason"] != "bound-to-other-agent" || dg["deliveryId"] != "job:j1:run:20260302T100000Z" {
		t.Fatalf("diagnostic = %v", dg)
	}
	if code, out, errOut := cliRun(t, "inspect", "runs", "j1", "-config", cfg); code != 0 || !strings.Contains(out, "DIAGNOSTICS") || !strings.Contains(out, "warn:bound-to-other-agent") {
		t.Fatalf("runs j1 text: exit %d %s\n%s", code, errOut, out)
	}

	// All runs: the failed manual run has no scheduled time and [] message ids.
	code, out, errOut = cliRun(t, "inspect", "runs", "-json", "-config", cfg)
	if code != 0 {
		t.Fatalf("runs: exit %d: %s", code, errOut)
	}
	all := jsonLines(t, out)
	if len(all) != 2 {
		t.Fatalf("runs:\n%s", out)
	}
	f := all[1]
	fd := f["delivery"].(map[string]any)
	if f["jobId"] != "j2" || f["status"] != "error" || f["late"] != false || f["scheduledAt"] != nil || fd["status"] != "failed" || fd["error"] != "404" {
		t.Fatalf("failed run = %v", f)
	}
	if ids, ok := fd["messageIds"].([]any); !ok || len(ids) != 0 {
		t.Fatalf("failed run messageIds = %v", fd["messageIds"])
	}
	if ds, ok := f["diagnostics"].([]any); !ok || len(ds) != 0 {
		t.Fatalf("failed run diagnostics = %v", f["diagnostics"])
	}
	// An unknown job exits 1.
	if code, _, errOut := cliRun(t, "inspect", "runs", "nope", "-json", "-config", cfg); code != 1 || !strings.Contains(errOut, "nope") {
		t.Fatalf("unknown job: exit %d, stderr %q", code, errOut)
	}
}

func TestCLIBadConfigExits2NamingTheKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ yaml, key string }{
		{"scheduler:\n  catchUpMised: true\n", "catchUpMised"},
		{"scheduler:\n  maxCatchUp: 0\n", "scheduler.maxCatchUp"},
		{"log:\n  level: info\n  formatt: json\n", "formatt"},
	} {
		cfg, _ := cliConfig(t, tc.yaml)
		for _, args := range [][]string{{"inspect", "jobs", "-config", cfg}, {"doctor", "-config", cfg}, {"run", "-config", cfg}} {
			code, _, errOut := cliRun(t, args...)
			if code != 2 || !strings.Contains(errOut, tc.key) || !strings.Contains(errOut, cfg) {
				t.Errorf("%v with %q: exit %d, stderr %q", args[0], tc.yaml, code, errOut)
			}
		}
	}
	code, _, errOut := cliRun(t, "inspect", "jobs", "-config", filepath.Join(t.TempDir(), "missing.yaml"))
	if code != 2 || !strings.Contains(errOut, "missing.yaml") {
		t.Fatalf("missing config: exit %d, stderr %q", code, errOut)
	}
}

func TestCLILockedStoreExits2(t *testing.T) {
	t.Parallel()
	// apiURL points nowhere: should the lock ever be missed, `bot run`
	// fails fast instead of reaching Discord.
	cfg, storePath := cliConfig(t, "discord:\n  token: \"test-token-value\"\n  apiURL: \"http://127.0.0.1:1\"\n")
	st, err := bolt.Open(storePath, bolt.Options{LockTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, args := range [][]string{{"inspect", "jobs", "-json", "-config", cfg}, {"doctor", "-config", cfg}, {"run", "-config", cfg}} {
		t.Run(args[0], func(t *testing.T) {
			t.Parallel()
			code, _, errOut := cliRun(t, args...)
			if code != 2 || !strings.Contains(errOut, "locked by another bot process") || !strings.Contains(errOut, storePath) {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
		})
	}
}

func TestCLIVersion(t *testing.T) {
	t.Parallel()
	code, out, _ := cliRun(t, "version")
	if code != 0 || out != "bot "+version+"\n" {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
	if code, _, errOut := cliRun(t, "frobnicate"); code != 2 || !strings.Contains(errOut, "frobnicate") {
		t.Fatalf("unknown command: exit %d, stderr %q", code, errOut)
	}
}

func TestCLIDoctorReportsAndFixesOldStyleJobs(t *testing.T) {
	t.Parallel()
	cfg, storePath := cliConfig(t, "")
	key := "agent:main:discord:channel:300"
	cliSeed(t, storePath, func(st *bolt.Store) {
		for _, j := range []scheduler.Job{
			oldStyleJob("a-session-elsewhere", "session:"+key, "channel:400"),
			oldStyleJob("b-main-elsewhere", "main", "channel:400"),
			oldStyleJob("c-healthy", "main", ""),
		} {
			if err := st.PutJob(t.Context(), j); err != nil {
				t.Fatal(err)
			}
		}
	})
	code, out, errOut := cliRun(t, "doctor", "-config", cfg)
	if code != 1 {
		t.Fatalf("doctor: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"✘ job a-session-elsewhere", "✘ job b-main-elsewhere", "bot doctor -fix would:", "2 problem(s) remain"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "c-healthy") {
		t.Errorf("healthy job reported:\n%s", out)
	}

	code, out, errOut = cliRun(t, "doctor", "-fix", "-config", cfg)
	if code != 0 {
		t.Fatalf("doctor -fix: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"✔ job a-session-elsewhere", "✔ job b-main-elsewhere", "no longer sees " + key + "'s history", "✔ healthy"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor -fix output lacks %q:\n%s", want, out)
		}
	}

	code, out, errOut = cliRun(t, "doctor", "-config", cfg)
	if code != 0 || !strings.Contains(out, "✔ healthy") || strings.Contains(out, "✘") {
		t.Fatalf("doctor after -fix: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = cliRun(t, "inspect", "jobs", "-json", "-config", cfg)
	if code != 0 {
		t.Fatal(code)
	}
	modes := map[string]any{}
	for _, o := range jsonLines(t, out) {
		modes[o["id"].(string)] = o["mode"]
	}
	if modes["a-session-elsewhere"] != "background" || modes["b-main-elsewhere"] != "background" || modes["c-healthy"] != "in-chat" {
		t.Fatalf("modes after -fix: %v", modes)
	}
}

func TestCLIRunWithoutTokenExits2(t *testing.T) {
	t.Parallel()
	const secret = "Bot sekrit-token-value-42"
	for _, tc := range []struct{ yaml, want string }{
		{"discord:\n  token: \"\"\n", "DISCORD_TOKEN"},
		{"discord:\n  token: \"" + secret + "\"\n", "discord.token"},
	} {
		cfg, storePath := cliConfig(t, tc.yaml)
		code, out, errOut := cliRun(t, "run", "-config", cfg)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Fatalf("exit %d, stderr %q", code, errOut)
		}
		if strings.Contains(out+errOut, "sekrit") {
			t.Fatalf("the token value was printed: %q", out+errOut)
		}
		if _, err := os.Stat(storePath); err == nil {
			t.Fatal("bot run created the store before checking the token")
		}
	}
}

func TestCLIDemo(t *testing.T) {
	t.Parallel()
	code, out, errOut := cliRun(t, "demo")
	if code != 0 {
		t.Fatalf("demo: exit %d\n%s\n%s", code, out, errOut)
	}
	_, checks, ok := strings.Cut(out, "invariant checks:")
	if !ok {
		t.Fatalf("no invariant checks:\n%s", out)
	}
	var marks []string
	for _, line := range strings.Split(checks, "\n") {
		if l := strings.TrimSpace(line); l != "" {
			marks = append(marks, strings.Fields(l)[0])
		}
	}
	if len(marks) < 4 || slices.ContainsFunc(marks, func(m string) bool { return m != "✔" }) {
		t.Fatalf("checks not all ✔:\n%s", checks)
	}
	if !strings.Contains(out, "displayed:") || !strings.Contains(out, "transcript agent:main:discord:channel:") {
		t.Fatalf("demo does not show channels and transcripts:\n%s", out)
	}
}
