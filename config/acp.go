package config

import (
	"strings"
	"time"
)

// ACPConfig is the acp section: external coding agents speaking the Agent Client Protocol that a
// thread can be bound to (/spawn agent:<name>, /focus acp:<name>).
type ACPConfig struct {
	Agents map[string]ACPAgentConfig `yaml:"agents"`
	// PermissionTimeout: a permission request nobody answers within it is rejected.
	PermissionTimeout time.Duration `yaml:"permissionTimeout"`
}

// ACPAgentConfig is one acp.agents.<name>.
type ACPAgentConfig struct {
	Command string   `yaml:"command"` // the agent program (PATH is searched)
	Args    []string `yaml:"args"`
	// Env is the agent's whole configured environment (plus PATH and a HOME of its own); values that
	// reference ${VAR} are secrets (never logged). Nothing else of the bot's environment is passed.
	Env       map[string]string `yaml:"env"`
	Workspace string            `yaml:"workspace"` // root; each bound session gets its own directory under it
	Users     []string          `yaml:"users"`     // may start and approve; empty users and roles = operators only
	Roles     []string          `yaml:"roles"`
	// IdleShutdown stops an agent process idle this long (the session resumes at the next message); 0 = never.
	IdleShutdown time.Duration `yaml:"idleShutdown"`
	MaxSessions  int           `yaml:"maxSessions"` // concurrently running agent processes; 0 = no cap
	// Terminal lets the agent run commands (ACP terminal/*) in its workspace.
	Terminal bool `yaml:"terminal"`
	// Sandbox confines the agent and its commands: bwrap (bubblewrap) or none.
	Sandbox string `yaml:"sandbox"`
	// Network gives commands in the sandbox the network.
	Network bool `yaml:"network"`
	// CommandTimeout kills a command running longer; 0 = none.
	CommandTimeout time.Duration `yaml:"commandTimeout"`
	// Approve: ask (each command is shown with Allow/Deny buttons first) or agent (the agent's own
	// permission request is trusted).
	Approve string `yaml:"approve"`
}

// Sandbox and approval modes.
const (
	SandboxBwrap = "bwrap"
	SandboxNone  = "none"
	ApproveAsk   = "ask"
	ApproveAgent = "agent"
)

func (a *ACPAgentConfig) setDefaults() {
	*a = ACPAgentConfig{IdleShutdown: 30 * time.Minute, MaxSessions: 4, Sandbox: SandboxBwrap, CommandTimeout: 10 * time.Minute, Approve: ApproveAsk}
}

// validateACP checks acp.agents: a command and a workspace each, ids in the user and role lists, and
// no name that is also an agents[] id (/spawn agent: names either).
func (c *Config) validateACP() *Error {
	if c.ACP.PermissionTimeout < 0 {
		return c.src.errAt("acp.permissionTimeout", "must not be negative")
	}
	for _, name := range sortedKeys(c.ACP.Agents) {
		a := c.ACP.Agents[name]
		p := "acp.agents." + name
		if !validAgentID(name) {
			return c.src.errAt(p, "%s may use only lowercase letters, digits, '_' and '-', e.g. gemini", show(name))
		}
		for i, ag := range c.Agents {
			if ag.ID == name {
				return c.src.errAt(p, "acp.agents.%s collides with agents[%d].id %s: /spawn agent: names either, so rename one", name, i, show(ag.ID))
			}
		}
		if strings.TrimSpace(a.Command) == "" {
			return c.src.errAt(p+".command", "is required: the agent program, e.g. gemini")
		}
		if strings.TrimSpace(a.Workspace) == "" {
			return c.src.errAt(p+".workspace", "is required: a directory under which each bound session gets its own, e.g. data/acp/%s", name)
		}
		for k := range a.Env {
			if !validEnvName(k) {
				return c.src.errAt(p+".env."+k, "%s is not an environment variable name", show(k))
			}
		}
		if a.IdleShutdown < 0 {
			return c.src.errAt(p+".idleShutdown", "must not be negative (0 = never)")
		}
		if a.MaxSessions < 0 {
			return c.src.errAt(p+".maxSessions", "must not be negative (0 = no cap)")
		}
		if a.Sandbox != SandboxBwrap && a.Sandbox != SandboxNone {
			return c.src.errAt(p+".sandbox", "%s is not a sandbox: use bwrap (bubblewrap: workspace read-write, system read-only, no network) or none", show(a.Sandbox))
		}
		if a.Network && a.Sandbox == SandboxNone {
			return c.src.errAt(p+".network", "applies inside the sandbox only: with sandbox: none commands have the host's network anyway; remove it or use sandbox: bwrap")
		}
		if a.CommandTimeout < 0 {
			return c.src.errAt(p+".commandTimeout", "must not be negative (0 = none)")
		}
		if a.Approve != ApproveAsk && a.Approve != ApproveAgent {
			return c.src.errAt(p+".approve", "%s is not an approval mode: use ask (every command is shown with buttons before it starts) or agent (trust the agent's own permission request)", show(a.Approve))
		}
		if err := c.checkIDs(p+".users", a.Users, "Copy User ID"); err != nil {
			return err
		}
		if err := c.checkIDs(p+".roles", a.Roles, "Copy Role ID (Server Settings > Roles)"); err != nil {
			return err
		}
	}
	return nil
}

// acpSecrets are the acp agents' env values (every one: any may be a credential).
func (c *Config) acpSecrets() []string {
	var out []string
	for _, a := range c.ACP.Agents {
		for _, v := range a.Env {
			out = append(out, v) // as an MCP server's env: any value may be a credential
		}
	}
	return out
}
