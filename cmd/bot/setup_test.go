package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/rs/zerolog"

	"github.com/agentbot/agentbot/adapter/discord"
	"github.com/agentbot/agentbot/adapter/discord/discordtest"
	"github.com/agentbot/agentbot/bot"
	"github.com/agentbot/agentbot/config"
	"github.com/agentbot/agentbot/store/bolt"
)

// TestCLISetupAgainstEmulator: `bot setup -token X` checks the token,
// reports the intent and the guilds, prints the invite URL and writes a
// config (token as ${DISCORD_TOKEN}) that bot doctor validates and bot run
// accepts and connects with.
func TestCLISetupAgainstEmulator(t *testing.T) {
	e := discordtest.NewTest(t, discordtest.Options{Token: "s3cret-token.abc"})
	g := e.AddGuild("lab")
	if _, err := e.AddTextChannel(g.ID, "general"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	t.Chdir(dir) // the example's store.path is relative: data/bot.db
	cfgPath := filepath.Join(dir, "config.yaml")
	var stdout, stderr bytes.Buffer
	// A pasted token often carries spaces and a newline.
	code := cmdSetup(t.Context(), []string{"-token", "  s3cret-token.abc\n", "-api-url", e.URL(), "-config", cfgPath}, &stdout, &stderr, setupOptions{})
	out := stdout.String()
	t.Log(out)
	if code != exitOK {
		t.Fatalf("setup exit %d\n%s\n%s", code, out, stderr.String())
	}
	perms := strconv.FormatInt(discordgo.PermissionViewChannel|discordgo.PermissionSendMessages|discordgo.PermissionReadMessageHistory|
		discordgo.PermissionEmbedLinks|discordgo.PermissionSendMessagesInThreads|discordgo.PermissionCreatePublicThreads|discordgo.PermissionManageWebhooks, 10)
	for _, want := range []string{
		"✔ token is valid: bot agentbot",
		"✔ Message Content intent is enabled",
		"https://discord.com/oauth2/authorize?client_id=" + e.ApplicationID() + "&scope=bot+applications.commands&permissions=" + perms + "\n",
		"Manage Webhooks", g.ID + "  lab",
		"bot doctor -live -config " + cfgPath, "bot run -config " + cfgPath,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("setup output lacks %q:\n%s", want, out)
		}
	}
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "s3cret") || !strings.Contains(string(data), "token: ${DISCORD_TOKEN}") {
		t.Fatalf("config must hold ${DISCORD_TOKEN}, never the token:\n%s", data)
	}
	if fi, _ := os.Stat(cfgPath); fi.Mode().Perm() != 0o600 {
		t.Errorf("config mode %v", fi.Mode().Perm())
	}
	// A second setup does not overwrite it.
	if code, _, errOut := cliRun(t, "setup", "-token", "s3cret-token.abc", "-api-url", e.URL(), "-config", cfgPath); code != exitUsage || !strings.Contains(errOut, "-force") {
		t.Fatalf("setup over an existing config: exit %d %s", code, errOut)
	}

	t.Setenv("DISCORD_TOKEN", "s3cret-token.abc")
	if code, out, errOut := cliRun(t, "doctor", "-live", "-config", cfgPath); code != exitOK {
		t.Fatalf("doctor -live on the written config: exit %d\n%s\n%s", code, out, errOut)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.ValidateForRun(); err != nil {
		t.Fatalf("bot run refuses the written config: %v", err)
	}
	cfg.HTTP.Listen = "127.0.0.1:0" // the example's fixed port may be taken on a shared machine
	stop := startApp(t, cfg)
	if err := e.WaitHeartbeats(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	stop()
}

// startApp runs the application on cfg until it is connected; stop
// ends it and requires a clean stop.
func startApp(t *testing.T, cfg *config.Config) (stop func()) {
	t.Helper()
	a, err := bot.New(bot.Options{Config: cfg}, bot.Deps{Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)})
	if err != nil {
		t.Fatalf("bot run refuses the config: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	select {
	case <-a.Connected():
	case err := <-done:
		t.Fatalf("bot run stopped: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("bot run did not connect")
	}
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// TestCLISetupReportsIntentOffAndBadToken: the Message Content intent off
// is said with its fix; a token Discord refuses exits 2 saying so.
func TestCLISetupReportsIntentOffAndBadToken(t *testing.T) {
	t.Parallel()
	e := discordtest.NewTest(t, discordtest.Options{})
	e.SetApplicationFlags(0)
	cfgPath := filepath.Join(t.TempDir(), "config.yaml")
	var stdout, stderr bytes.Buffer
	if code := cmdSetup(t.Context(), []string{"-token", e.Token(), "-api-url", e.URL(), "-config", cfgPath}, &stdout, &stderr, setupOptions{}); code != exitOK {
		t.Fatalf("exit %d %s", code, stderr.String())
	}
	for _, want := range []string{"✘ Message Content intent is OFF", "https://discord.com/developers/applications/" + e.ApplicationID() + "/bot", "in no server yet"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stdout.String())
		}
	}
	stdout.Reset()
	stderr.Reset()
	code := cmdSetup(t.Context(), []string{"-token", "wrong", "-api-url", e.URL(), "-config", cfgPath + ".2"}, &stdout, &stderr, setupOptions{})
	if code != exitUsage || !strings.Contains(stderr.String(), "Discord refused the token") || strings.Contains(stderr.String(), "wrong") {
		t.Fatalf("bad token: exit %d %q", code, stderr.String())
	}
	if _, err := os.Stat(cfgPath + ".2"); err == nil {
		t.Fatal("a config was written for a refused token")
	}
	// Without a terminal and without a token: exit 2, nothing asked.
	t.Run("no token", func(t *testing.T) {
		if os.Getenv("DISCORD_TOKEN") != "" {
			t.Skip("DISCORD_TOKEN is set in the environment")
		}
		var so, se bytes.Buffer
		if code := cmdSetup(t.Context(), []string{"-api-url", e.URL(), "-config", cfgPath + ".3"}, &so, &se, setupOptions{}); code != exitUsage || !strings.Contains(se.String(), "no token") {
			t.Fatalf("exit %d %q", code, se.String())
		}
	})
}

// liveWorld is a guild where #ops denies the bot Manage Webhooks, and a
// config file serving it.
func liveWorld(t *testing.T, extra string) (*discordtest.Emulator, discordtest.Channel, string) {
	t.Helper()
	e := discordtest.NewTest(t, discordtest.Options{})
	g := e.AddGuild("lab")
	// As Discord sets a server up: @everyone's defaults, and the bot's own
	// role with the invite URL's permissions.
	if err := e.SetRolePermissions(g.ID, g.ID, discordtest.DefaultEveryone); err != nil {
		t.Fatal(err)
	}
	role, err := e.AddRole(g.ID, "agentbot", discord.InvitePermissions())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.GrantRole(g.ID, e.BotUserID(), role.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.AddTextChannel(g.ID, "general"); err != nil {
		t.Fatal(err)
	}
	ops, err := e.AddTextChannel(g.ID, "ops")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.SetOverwrite(ops.ID, discordtest.Overwrite{ID: e.BotUserID(), Type: discordtest.OverwriteMember, Deny: discordgo.PermissionManageWebhooks}); err != nil {
		t.Fatal(err)
	}
	cfg, _ := cliConfig(t, fmt.Sprintf("discord:\n  token: %s\n  apiURL: %s\n%s", e.Token(), e.URL(), extra))
	return e, ops, cfg
}

// TestCLIDoctorLiveNamesTheChannelDenyingManageWebhooks: with thread
// bindings on, a channel denying the bot Manage Webhooks is named, with
// the fix, and doctor exits 1; with thread bindings off it is not needed.
func TestCLIDoctorLiveNamesTheChannelDenyingManageWebhooks(t *testing.T) {
	t.Parallel()
	_, ops, cfg := liveWorld(t, "")
	code, out, errOut := cliRun(t, "doctor", "-live", "-config", cfg)
	t.Log(out)
	if code != exitProblems {
		t.Fatalf("exit %d, want 1\n%s\n%s", code, out, errOut)
	}
	var line string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "✘") {
			if line != "" {
				t.Fatalf("more than one problem:\n%s", out)
			}
			line = l
		}
	}
	for _, want := range []string{"lab", "#ops", "Manage Webhooks", "persona", "Edit Channel #ops → Permissions"} {
		if !strings.Contains(line, want) {
			t.Errorf("the problem line lacks %q: %q", want, line)
		}
	}
	if strings.Contains(out, "#general") {
		t.Errorf("#general is fine but listed:\n%s", out)
	}
	if !strings.Contains(out, "1 problem(s) remain") {
		t.Errorf("no summary:\n%s", out)
	}
	_ = ops

	_, _, cfg = liveWorld(t, "  threadBindings: {enabled: false}\n")
	if code, out, errOut := cliRun(t, "doctor", "-live", "-config", cfg); code != exitOK {
		t.Fatalf("thread bindings off: exit %d\n%s\n%s", code, out, errOut)
	}
}

// syncBuffer is a bytes.Buffer safe for the bot's goroutines that signals
// when a written line contains want.
type syncBuffer struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	hit  chan struct{}
	once sync.Once
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if bytes.Contains(p, []byte(b.want)) {
		b.once.Do(func() { close(b.hit) })
	}
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestCLIRunLogsLiveFindingsAtStart: `bot run` logs the doctor -live
// findings once, as warnings.
func TestCLIRunLogsLiveFindingsAtStart(t *testing.T) {
	t.Parallel()
	_, ops, cfg := liveWorld(t, "log: {format: json}\n")
	errOut := &syncBuffer{want: `"missing":"Manage Webhooks"`, hit: make(chan struct{})}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan int, 1)
	go func() { done <- cmdRun(ctx, []string{"-config", cfg}, errOut) }()
	select {
	case <-errOut.hit:
	case code := <-done:
		t.Fatalf("bot run exited %d:\n%s", code, errOut.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("no warning logged:\n%s", errOut.String())
	}
	cancel()
	if code := <-done; code != exitOK {
		t.Fatalf("exit %d:\n%s", code, errOut.String())
	}
	var warn string
	for _, l := range strings.Split(errOut.String(), "\n") {
		if strings.Contains(l, `"missing"`) {
			if warn != "" {
				t.Fatalf("logged more than once:\n%s", errOut.String())
			}
			warn = l
		}
	}
	for _, want := range []string{`"level":"warn"`, `"channel":"#ops"`, `"channelID":"` + ops.ID + `"`, `"fix":"Edit Channel #ops`} {
		if !strings.Contains(warn, want) {
			t.Errorf("warning lacks %s: %s", want, warn)
		}
	}
}

// TestCLIBackupOfARunningBot: the running bot holds the lock; bot backup
// gets a consistent copy through GET /backup (bearer http.token), which
// opens and inspects cleanly; without the token it is refused. bot
// healthcheck answers 0 while it runs, 1 once it stopped.
func TestCLIBackupOfARunningBot(t *testing.T) {
	t.Parallel()
	e := discordtest.NewTest(t, discordtest.Options{})
	g := e.AddGuild("demo")
	general, err := e.AddTextChannel(g.ID, "general")
	must(t, err)
	alice, err := e.AddMember(g.ID, "alice")
	must(t, err)
	cfg := config.Default()
	cfg.Discord.Token, cfg.Discord.APIURL = e.Token(), e.URL()
	cfg.Store.Path = filepath.Join(t.TempDir(), "bot.db")
	cfg.HTTP.Listen, cfg.HTTP.Token = "127.0.0.1:0", "backup-secret"
	a, err := bot.New(bot.Options{Config: cfg}, bot.Deps{Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)})
	must(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var addr string
	select {
	case addr = <-a.HTTPAddr():
	case <-time.After(10 * time.Second):
		t.Fatal("the HTTP server did not start")
	}
	<-a.Connected()
	must(t, e.WaitHeartbeats(t.Context(), 1))
	_, err = e.UserSay(general.ID, alice.ID, "<@"+e.BotUserID()+"> remember me")
	must(t, err)
	if _, err := e.WaitMessages(t.Context(), general.ID, 2); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfgFor := func(store, token string) string {
		p := filepath.Join(dir, "config-"+strconv.Itoa(len(token))+filepath.Base(store)+".yaml")
		body := fmt.Sprintf("store:\n  path: %q\nhttp:\n  listen: %q\n  token: %q\n", store, addr, token)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// The container HEALTHCHECK asks /healthz (no token needed).
	if code, out, errOut := cliRun(t, "healthcheck", "-config", cfgFor(cfg.Store.Path, "")); code != exitOK || out != "ok\n" {
		t.Fatalf("healthcheck of the running bot: exit %d %q %s", code, out, errOut)
	}
	copyPath := filepath.Join(dir, "backup", "bot.db")
	code, out, errOut := cliRun(t, "backup", copyPath, "-config", cfgFor(cfg.Store.Path, "backup-secret"))
	if code != exitOK || !strings.Contains(out, "from the running bot") || !strings.Contains(out, fmt.Sprintf("schema %d", bolt.SchemaVersion)) {
		t.Fatalf("backup: exit %d\n%s\n%s", code, out, errOut)
	}
	// The copy inspects cleanly: the conversation is in it.
	copyCfg := cfgFor(copyPath, "")
	code, out, errOut = cliRun(t, "inspect", "transcript", "agent:main:discord:channel:"+general.ID, "-config", copyCfg)
	if code != exitOK || !strings.Contains(out, "remember me") {
		t.Fatalf("inspect the copy: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, out, errOut := cliRun(t, "doctor", "-config", copyCfg); code != exitOK {
		t.Fatalf("doctor on the copy: exit %d\n%s\n%s", code, out, errOut)
	}
	// A wrong token is refused and leaves no file.
	bad := filepath.Join(dir, "bad.db")
	if code, _, errOut := cliRun(t, "backup", bad, "-config", cfgFor(cfg.Store.Path, "nope")); code != exitProblems || !strings.Contains(errOut, "401") {
		t.Fatalf("wrong token: exit %d %s", code, errOut)
	}
	if _, err := os.Stat(bad); err == nil {
		t.Fatal("a refused backup left a file")
	}
	// Without http.token the running bot's store cannot be backed up: exit 2 saying why.
	if code, _, errOut := cliRun(t, "backup", bad, "-config", cfgFor(cfg.Store.Path, "")); code != exitUsage || !strings.Contains(errOut, "http.token") {
		t.Fatalf("no token: exit %d %s", code, errOut)
	}
	// Stopped: the file is copied directly, and the health check fails.
	cancel()
	must(t, <-done)
	if code, _, _ := cliRun(t, "healthcheck", "-config", cfgFor(cfg.Store.Path, "")); code != exitProblems {
		t.Fatalf("healthcheck of a stopped bot: exit %d, want 1", code)
	}
	if code, out, errOut := cliRun(t, "backup", filepath.Join(dir, "cold.db"), "-config", cfgFor(cfg.Store.Path, "")); code != exitOK || !strings.Contains(out, "from the file") {
		t.Fatalf("backup of a stopped bot: exit %d\n%s\n%s", code, out, errOut)
	}
}

// TestCLISetupAsksForTheToken: on a terminal (here a pipe) without -token
// or DISCORD_TOKEN the token is read from stdin and never printed.
func TestCLISetupAsksForTheToken(t *testing.T) {
	t.Setenv("DISCORD_TOKEN", "")
	e := discordtest.NewTest(t, discordtest.Options{Token: "typed-token-xyz"})
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := w.WriteString("typed-token-xyz\n"); err != nil {
		t.Fatal(err)
	}
	w.Close()
	var stdout, stderr bytes.Buffer
	cfgPath := filepath.Join(t.TempDir(), "config.yaml")
	if code := cmdSetup(t.Context(), []string{"-api-url", e.URL(), "-config", cfgPath}, &stdout, &stderr, setupOptions{stdin: r}); code != exitOK {
		t.Fatalf("exit %d %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "Bot token") || !strings.Contains(stdout.String(), "✔ token is valid") || strings.Contains(stdout.String()+stderr.String(), "typed-token") {
		t.Fatalf("output:\n%s\n%s", stdout.String(), stderr.String())
	}
}
