package config

import (
	"fmt"
	"net"
	"net/url"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Validate checks every value and cross reference, returning the first problem as an *Error that
// wraps ErrInvalid. It does not require a Discord token (see ValidateForRun). Load and LoadBytes call
// it; call it yourself for a Config built in code.
func (c *Config) Validate() error {
	for _, check := range []func() *Error{
		c.validateDiscord, c.validateModels, c.validateAgents, c.validateSubagents,
		c.validateScheduler, c.validateStore, c.validateHTTP, c.validateLog, c.validateMCP, c.validateACP, c.validateMatrix,
		c.validateAudit, c.validateEmbeddings,
	} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// ValidateForRun checks what `bot run` needs beyond Validate: a Discord token, unless the bot runs
// on Matrix only (no discord.token, the matrix section on). The message never contains the token.
func (c *Config) ValidateForRun() error {
	if err := c.Validate(); err != nil {
		return err
	}
	if !c.DiscordOn() {
		return nil // Matrix only: matrix.accessToken was checked by Validate
	}
	const path = "discord.token"
	token := c.Discord.Token
	file := "the config file"
	if c.src != nil && c.src.file != "" {
		file = c.src.file
	}
	switch {
	case strings.TrimSpace(token) == "":
		return c.src.errAt(path, "a Discord bot token is required to run%s: set the DISCORD_TOKEN environment variable "+
			"(the example config reads ${DISCORD_TOKEN}) or set discord.token in %s; `bot demo` needs no token",
			c.src.unsetHint(path), file)
	case strings.HasPrefix(token, "Bot "):
		return c.src.errAt(path, "remove the \"Bot \" prefix: give the token only")
	case strings.ContainsAny(token, " \t\r\n"):
		return c.src.errAt(path, "the token contains whitespace; copy it again from the Discord Developer Portal (Bot > Reset Token)")
	}
	return nil
}

func (c *Config) validateDiscord() *Error {
	d := c.Discord
	if err := c.checkURL("discord.apiURL", d.APIURL, "http://127.0.0.1:8080/api/v10"); err != nil {
		return err
	}
	if err := c.checkIDs("discord.guilds", d.Guilds, "Copy Server ID"); err != nil {
		return err
	}
	if err := c.checkIDs("discord.operators.users", d.Operators.Users, "Copy User ID"); err != nil {
		return err
	}
	if err := c.checkIDs("discord.operators.roles", d.Operators.Roles, "Copy Role ID"); err != nil {
		return err
	}
	if err := c.validateAccess(); err != nil {
		return err
	}
	if err := c.validateShard(); err != nil {
		return err
	}
	switch d.Edits {
	case EditsHistory, EditsReprocess:
	default:
		return c.src.errAt("discord.edits", "must be history (the model sees an edited message's new text next time) or reprocess (an edited message addressed to the bot is answered again), got %s", show(d.Edits))
	}
	tb := d.ThreadBindings
	if tb.IdleHours < 0 {
		return c.src.errAt("discord.threadBindings.idleHours", "must be 0 or more (hours of inactivity before a thread is unbound; 0 disables), got %v", tb.IdleHours)
	}
	if tb.MaxAgeHours < 0 {
		return c.src.errAt("discord.threadBindings.maxAgeHours", "must be 0 or more (hours from binding until a thread is unbound; 0 disables), got %v", tb.MaxAgeHours)
	}
	return nil
}

// resolveAccess makes access and its alias discord.access one value (both
// hold it after): the one the file set, or the default. Setting both is an
// error naming both. It returns the key the file used.
func (c *Config) resolveAccess() (string, *Error) {
	var top, alias bool
	if c.src != nil {
		_, top = c.src.lines["access"]
		_, alias = c.src.lines["discord.access"]
	} else { // built in code: the one that differs from the default
		def := Default().Access
		top, alias = !reflect.DeepEqual(c.Access, def), !reflect.DeepEqual(c.Discord.Access, def)
	}
	switch {
	case top && alias:
		return "access", c.src.errAt("access", "and discord.access are both set: discord.access is the old name of access (one policy for Discord and Matrix); keep only access")
	case alias:
		c.Access = c.Discord.Access
		return "discord.access", nil
	}
	c.Discord.Access = c.Access
	return "access", nil
}

// validateAccess checks access (or its alias discord.access): the dm mode, every id list, and the rate limit.
// Ids are Discord snowflakes or Matrix ids (users @user:server, channels !room:server).
func (c *Config) validateAccess() *Error {
	key, err := c.resolveAccess()
	if err != nil {
		return err
	}
	a := c.Access
	switch a.DM {
	case DMOff, DMAllowlist, DMMembers:
	default:
		return c.src.errAt(key+".dm", "must be off, allowlist (only allow.users) or members (users who share a server with the bot), got %s", show(a.DM))
	}
	for _, l := range []struct {
		name  string
		lists AccessLists
	}{{"allow", a.Allow}, {"deny", a.Deny}} {
		p := key + "." + l.name
		if err := c.checkAccessIDs(p+".users", l.lists.Users, "Copy User ID", '@'); err != nil {
			return err
		}
		if err := c.checkIDs(p+".roles", l.lists.Roles, "Copy Role ID"); err != nil {
			return err
		}
		if err := c.checkAccessIDs(p+".channels", l.lists.Channels, "Copy Channel ID", '!'); err != nil {
			return err
		}
	}
	if a.DM == DMAllowlist && len(a.Allow.Users) == 0 {
		return c.src.errAt(key+".dm", "is allowlist but %s.allow.users is empty, so no DM would be answered: list user ids there, or set dm: off", key)
	}
	r := a.RateLimit
	if r.Turns < 0 {
		return c.src.errAt(key+".rateLimit.turns", "must be 0 (no per-user limit) or more, got %d", r.Turns)
	}
	if r.GuildTurns < 0 {
		return c.src.errAt(key+".rateLimit.guildTurns", "must be 0 (no per-server limit) or more, got %d", r.GuildTurns)
	}
	if (r.Turns > 0 || r.GuildTurns > 0) && r.Per < time.Second {
		return c.src.errAt(key+".rateLimit.per", "must be a duration of at least 1s (e.g. 1h) when turns or guildTurns is set, got %s", r.Per)
	}
	b := a.Budget
	if b.Tokens < 0 || b.Cost < 0 || b.GuildTokens < 0 || b.GuildCost < 0 {
		return c.src.errAt(key+".budget", "tokens, cost, guildTokens and guildCost must be 0 (off) or more")
	}
	if (b.Tokens > 0 || b.Cost > 0 || b.GuildTokens > 0 || b.GuildCost > 0) && b.Per < time.Minute {
		return c.src.errAt(key+".budget.per", "must be a duration of at least 1m (e.g. 24h) when a budget is set, got %s", b.Per)
	}
	return nil
}

// validateShard checks discord.shard: count is "auto" or a whole number >= 1 and 0 <= id < count
// (with auto, id < count is checked at connect time, against Discord's recommendation).
func (c *Config) validateShard() *Error {
	s := c.Discord.Shard
	n := 1
	switch s.Count {
	case "", ShardAuto:
	default:
		v, err := strconv.Atoi(s.Count)
		if err != nil || v < 1 {
			return c.src.errAt("discord.shard.count", "must be a whole number of at least 1, or \"auto\" (Discord's recommendation), got %s", show(s.Count))
		}
		n = v
	}
	if s.ID < 0 {
		return c.src.errAt("discord.shard.id", "must be 0 or more, got %d", s.ID)
	}
	if s.Count != ShardAuto && s.ID >= n {
		return c.src.errAt("discord.shard.id", "must be less than discord.shard.count (%d): shards are numbered 0 to %d, got %d", n, n-1, s.ID)
	}
	return nil
}

func (c *Config) validateModels() *Error {
	if len(c.Models) == 0 {
		return c.src.errAt("models", "at least one model is required, e.g. models: {default: {provider: echo}}")
	}
	for _, name := range sortedKeys(c.Models) {
		m := c.Models[name]
		p := "models." + name
		if !validModelName(name) {
			return c.src.errAt(p, "model name %s may use only letters, digits, '_', '-' and '.'", show(name))
		}
		switch m.Provider {
		case ProviderEcho, ProviderOpenAI, ProviderAnthropic:
		case "":
			return c.src.errAt(p+".provider", "is required: one of echo, openai, anthropic")
		default:
			return c.src.errAt(p+".provider", "unknown provider %s: use echo, openai or anthropic", show(m.Provider))
		}
		if err := c.checkURL(p+".baseURL", m.BaseURL, "http://127.0.0.1:11434/v1"); err != nil {
			return err
		}
		if m.Provider != ProviderEcho {
			if m.Model == "" {
				return c.src.errAt(p+".model", "is required for provider %s: the provider's model name, e.g. %q", m.Provider, exampleModel(m.Provider))
			}
			if m.APIKey == "" && m.BaseURL == "" {
				return c.src.errAt(p+".apiKey", "is required for provider %s%s: set it (e.g. apiKey: ${%s}), or set baseURL for a local server that needs no key",
					m.Provider, c.src.unsetHint(p+".apiKey"), strings.ToUpper(m.Provider)+"_API_KEY")
			}
		}
		if m.MaxHistory < 1 || m.MaxHistory > 1000 {
			return c.src.errAt(p+".maxHistory", "must be between 1 and 1000 (transcript entries sent to the model), got %d", m.MaxHistory)
		}
		if m.Timeout <= 0 {
			return c.src.errAt(p+".timeout", "must be more than 0, e.g. \"60s\"")
		}
		if m.MaxToolSteps < 0 || m.MaxToolSteps > 100 {
			return c.src.errAt(p+".maxToolSteps", "must be between 0 and 100 (tool calls per turn; 0 disables tools), got %d", m.MaxToolSteps)
		}
		seen := map[string]bool{}
		for i, f := range m.Fallbacks {
			fp := fmt.Sprintf("%s.fallbacks[%d]", p, i)
			switch _, ok := c.Models[f]; {
			case !ok:
				return c.src.errAt(fp, "%s is not defined under models; defined models: %s", show(f), strings.Join(sortedKeys(c.Models), ", "))
			case f == name:
				return c.src.errAt(fp, "a model cannot be its own fallback")
			case seen[f]:
				return c.src.errAt(fp, "%s is listed twice", show(f))
			}
			seen[f] = true
		}
		if m.Price.Input < 0 || m.Price.Output < 0 {
			return c.src.errAt(p+".price", "input and output must be 0 or more (currency units per million tokens)")
		}
	}
	return nil
}

func (c *Config) validateAgents() *Error {
	if len(c.Agents) == 0 {
		return c.src.errAt("agents", "at least one agent is required; remove the key to get the default agent \"main\"")
	}
	seen := map[string]int{}
	owner := map[string]int{} // channel id -> the agent claiming it
	for i, a := range c.Agents {
		p := fmt.Sprintf("agents[%d]", i)
		switch {
		case a.ID == "":
			return c.src.errAt(p+".id", "is required: a short name of lowercase letters, digits, '_' or '-', e.g. main")
		case !validAgentID(a.ID):
			return c.src.errAt(p+".id", "%s may use only lowercase letters, digits, '_' and '-', e.g. main or code-review", show(a.ID))
		}
		if j, dup := seen[a.ID]; dup {
			return c.src.errAt(p+".id", "%s is already the id of agents[%d]; agent ids must be unique", show(a.ID), j)
		}
		seen[a.ID] = i
		if err := c.checkURL(p+".avatarURL", a.AvatarURL, "https://example.com/avatar.png"); err != nil {
			return err
		}
		if err := c.validateChannels(i, owner); err != nil {
			return err
		}
		if _, ok := c.Models[a.Model]; !ok {
			hint := ""
			if c.src != nil && c.src.lines["agents"] == 0 {
				hint = " (this is the default agent, used because agents is not set)"
			}
			return c.src.errAt(p+".model", "%s is not defined under models%s; defined models: %s",
				show(a.Model), hint, strings.Join(sortedKeys(c.Models), ", "))
		}
	}
	return nil
}

// validateChannels checks agents[i].channels: ids, and each claimed by one
// agent only (owner: the index of the agent claiming each id so far). The
// ids are not checked against the platform here (no I/O): `bot doctor
// -live` names those the bot cannot see.
func (c *Config) validateChannels(i int, owner map[string]int) *Error {
	a, p := c.Agents[i], fmt.Sprintf("agents[%d]", i)
	for j, id := range a.Channels {
		key := fmt.Sprintf("%s.channels[%d]", p, j)
		switch {
		case strings.TrimSpace(id) == "":
			return c.src.errAt(key, "is empty: give a channel, category or server id (Matrix: a room id such as !abc:example.org)")
		case strings.ContainsAny(id, " \t\r\n"):
			return c.src.errAt(key, "%s contains whitespace; give the id alone", show(id))
		case strings.HasPrefix(id, "user:") || strings.HasPrefix(id, "@"):
			return c.src.errAt(key, "%s is a user: direct messages always go to the default agent (the first in agents); list channel, category or server ids", show(id))
		}
		if k, dup := owner[id]; dup && k != i {
			return c.src.errAt(key, "%s is also in agents[%d].channels (agent %s); an id routes to one agent only: remove it from %s or %s",
				show(id), k, show(c.Agents[k].ID), show(c.Agents[k].ID), show(a.ID))
		}
		owner[id] = i
	}
	return nil
}

func (c *Config) validateSubagents() *Error {
	s := c.Subagents
	if s.MaxConcurrent < 1 {
		return c.src.errAt("subagents.maxConcurrent", "must be at least 1, got %d", s.MaxConcurrent)
	}
	if s.RunTimeout <= 0 {
		return c.src.errAt("subagents.runTimeout", "must be more than 0, e.g. \"10m\"")
	}
	return nil
}

func (c *Config) validateScheduler() *Error {
	s := c.Scheduler
	if s.Timezone != "" {
		if _, err := time.LoadLocation(s.Timezone); err != nil || s.Timezone == "Local" {
			return c.src.errAt("scheduler.timezone", "unknown timezone %s: use an IANA name such as \"UTC\" or \"Europe/Berlin\"", show(s.Timezone))
		}
	}
	if s.MaxCatchUp < 1 || s.MaxCatchUp > 1000 {
		return c.src.errAt("scheduler.maxCatchUp", "must be between 1 and 1000 (missed runs per job after downtime; 1 = run once for all), got %d", s.MaxCatchUp)
	}
	if s.FailureAlert.After < 1 {
		return c.src.errAt("scheduler.failureAlert.after", "must be at least 1 (consecutive failures before an alert), got %d", s.FailureAlert.After)
	}
	if s.FailureAlert.Cooldown < 0 {
		return c.src.errAt("scheduler.failureAlert.cooldown", "must not be negative, e.g. \"1h\"")
	}
	if s.RunRetention < 1 {
		return c.src.errAt("scheduler.runRetention", "must be at least 1 (run records kept per job), got %d", s.RunRetention)
	}
	return nil
}

func (c *Config) validateStore() *Error {
	switch c.Store.Driver {
	case "bolt":
	case "postgres":
		if strings.TrimSpace(c.Store.DSN) == "" {
			return c.src.errAt("store.dsn", "is required with driver postgres, e.g. ${DATABASE_URL} "+
				"(postgres://user:password@host:5432/agentbot)")
		}
		return c.validateRetention()
	default:
		return c.src.errAt("store.driver", "unknown driver %s; use \"bolt\" or \"postgres\"", show(c.Store.Driver))
	}
	if c.Store.Path == "" {
		return c.src.errAt("store.path", "is required, e.g. data/bot.db")
	}
	return c.validateRetention()
}

func (c *Config) validateAudit() *Error {
	if e := c.Audit.Every; e != 0 && e < MinAuditEvery {
		return c.src.errAt("audit.every", "must be 0 (off) or at least %s: each audit reads every conversation's history from the platform, got %s", MinAuditEvery, e)
	}
	return nil
}

func (c *Config) validateRetention() *Error {
	if d := c.Store.DeliveryRetentionDays; d < 0 {
		return c.src.errAt("store.deliveryRetentionDays", "must be 0 (keep forever) or more days, got %d", d)
	}
	return nil
}

func (c *Config) validateHTTP() *Error {
	if tz := c.HTTP.Timezone; tz != "" {
		if _, err := time.LoadLocation(tz); err != nil || tz == "Local" {
			return c.src.errAt("http.timezone", "unknown timezone %s: use an IANA name such as \"UTC\" or \"Europe/Berlin\"", show(tz))
		}
	}
	listen := c.HTTP.Listen
	if listen == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(listen)
	if err == nil {
		var n int
		n, err = strconv.Atoi(port)
		if err == nil && (n < 0 || n > 65535) {
			err = fmt.Errorf("port out of range")
		}
	}
	if err != nil {
		return c.src.errAt("http.listen", "%s is not host:port: use e.g. \"127.0.0.1:9464\", or \"\" to disable the HTTP server", show(listen))
	}
	return nil
}

func (c *Config) validateLog() *Error {
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, c.Log.Level) {
		return c.src.errAt("log.level", "unknown level %s: use debug, info, warn or error", show(c.Log.Level))
	}
	if !slices.Contains([]string{"console", "json"}, c.Log.Format) {
		return c.src.errAt("log.format", "unknown format %s: use console or json", show(c.Log.Format))
	}
	return nil
}

// checkURL accepts "" or an absolute http(s) URL with a host.
func (c *Config) checkURL(path, raw, example string) *Error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return c.src.errAt(path, "%s is not an http:// or https:// URL: use e.g. %q, or leave it empty", show(raw), example)
	}
	return nil
}

// checkIDs requires Discord snowflakes: 17 to 20 digits.
func (c *Config) checkIDs(path string, ids []string, copyHint string) *Error {
	for i, id := range ids {
		if !validSnowflake(id) {
			return c.src.errAt(fmt.Sprintf("%s[%d]", path, i),
				"%s is not a Discord id (17-20 digits): enable Developer Mode in Discord, right-click and choose %s", show(id), copyHint)
		}
	}
	return nil
}

// checkAccessIDs checks ids that are Discord snowflakes or Matrix ids starting with sigil ('@' user, '!' room)
// and naming their server ("@alice:example.org").
func (c *Config) checkAccessIDs(path string, ids []string, copyHint string, sigil byte) *Error {
	for i, id := range ids {
		if validSnowflake(id) {
			continue
		}
		if local, server, ok := strings.Cut(id, ":"); ok && len(local) > 1 && local[0] == sigil && server != "" && !strings.ContainsAny(id, " \t\r\n") {
			continue
		}
		return c.src.errAt(fmt.Sprintf("%s[%d]", path, i),
			"%s is neither a Discord id (17-20 digits: enable Developer Mode, right-click and choose %s) nor a Matrix id (%c...:server)", show(id), copyHint, sigil)
	}
	return nil
}

func validSnowflake(s string) bool {
	if len(s) < 17 || len(s) > 20 {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

func validAgentID(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return s != ""
}

func validModelName(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return false
		}
	}
	return s != ""
}

func exampleModel(provider string) string {
	if provider == ProviderAnthropic {
		return "claude-sonnet-4-5"
	}
	return "gpt-4o-mini"
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (c *Config) validateMCP() *Error {
	for _, name := range sortedKeys(c.MCP.Servers) {
		s := c.MCP.Servers[name]
		p := "mcp.servers." + name
		if !validMCPName(name) {
			return c.src.errAt(p, "%s is not a server name: use 1-30 letters, digits and '-' (its tools reach the model as %s__<tool>)", show(name), "<name>")
		}
		switch {
		case s.Command == "" && s.URL == "":
			return c.src.errAt(p, "needs command (a stdio server, e.g. npx) or url (a streamable HTTP server)")
		case s.Command != "" && s.URL != "":
			return c.src.errAt(p+".url", "set either command (stdio) or url (HTTP), not both")
		case s.Command == "" && (len(s.Args) > 0 || len(s.Env) > 0):
			return c.src.errAt(p+".args", "args and env are for stdio servers (command); an HTTP server takes headers")
		case s.URL == "" && len(s.Headers) > 0:
			return c.src.errAt(p+".headers", "headers are for HTTP servers (url); a stdio server takes env")
		}
		if err := c.checkURL(p+".url", s.URL, "https://mcp.example.com/mcp"); err != nil {
			return err
		}
		for k := range s.Env {
			if !validEnvName(k) {
				return c.src.errAt(p+".env."+k, "%s is not an environment variable name (letters, digits and '_', not starting with a digit)", show(k))
			}
		}
		if s.Timeout <= 0 {
			return c.src.errAt(p+".timeout", "must be more than 0, e.g. \"30s\"")
		}
		if s.MaxResultBytes < 256 || s.MaxResultBytes > 1<<20 {
			return c.src.errAt(p+".maxResultBytes", "must be between 256 and 1048576 (bytes of one tool result the model sees), got %d", s.MaxResultBytes)
		}
		for i, t := range s.AllowedTools {
			if strings.TrimSpace(t) == "" {
				return c.src.errAt(fmt.Sprintf("%s.allowedTools[%d]", p, i), "is empty: name a tool the server lists")
			}
		}
		if err := c.checkIDs(p+".users", s.Users, "Copy User ID"); err != nil {
			return err
		}
		if err := c.checkIDs(p+".roles", s.Roles, "Copy Role ID"); err != nil {
			return err
		}
	}
	for i, a := range c.Agents {
		for j, name := range a.MCP {
			if _, ok := c.MCP.Servers[name]; !ok {
				defined := "none"
				if len(c.MCP.Servers) > 0 {
					defined = strings.Join(sortedKeys(c.MCP.Servers), ", ")
				}
				return c.src.errAt(fmt.Sprintf("agents[%d].mcp[%d]", i, j), "%s is not defined under mcp.servers; defined servers: %s", show(name), defined)
			}
		}
	}
	return nil
}

// validMCPName: letters, digits and '-', at most 30 (the model sees
// <name>__<tool>, within the providers' 64-character tool names).
func validMCPName(s string) bool {
	if s == "" || len(s) > 30 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

// EffectiveAccess is the access policy in force: access, or discord.access when only that differs from the
// default (a Config changed in code after loading, as tests do; a loaded file has both equal, resolveAccess).
func (c *Config) EffectiveAccess() AccessConfig {
	if reflect.DeepEqual(c.Access, Default().Access) {
		return c.Discord.Access
	}
	return c.Access
}
