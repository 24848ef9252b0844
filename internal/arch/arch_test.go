package arch_test

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/agentbot/agentbot/"

type pkg struct {
	ImportPath string
	Doc        string
	Imports    []string // production code only (test imports are free)
	Deps       []string // transitive
}

// load lists every package of the module.
func load(t *testing.T) map[string]pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Doc,Imports,Deps", module+"...")
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]pkg{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs[strings.TrimPrefix(p.ImportPath, module)] = p
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages: too few for a real check", len(pkgs))
	}
	return pkgs
}

// under reports whether rel is pattern ("core/...": core and below) or the package itself.
func under(rel, pattern string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return rel == base || strings.HasPrefix(rel, base+"/")
	}
	return rel == pattern
}

func hasPrefix(path string, prefixes []string) bool {
	return slices.ContainsFunc(prefixes, func(p string) bool { return path == p || strings.HasPrefix(path, p+"/") })
}

// TestNoForbiddenDependencies: packages matching from never depend, even
// transitively, on the packages listed in never.
func TestNoForbiddenDependencies(t *testing.T) {
	pkgs := load(t)
	platforms := []string{"github.com/bwmarrin/discordgo", "maunium.net/go/mautrix"}
	engines := []string{"go.etcd.io/bbolt", "github.com/jackc/pgx/v5", "github.com/blevesearch/bleve/v2"}
	protocols := []string{"github.com/modelcontextprotocol/go-sdk", "github.com/coder/acp-go-sdk"}
	rules := []struct {
		from   []string
		never  []string
		reason string
	}{
		{[]string{"core/..."}, slices.Concat(platforms, engines, protocols),
			"core speaks only project nouns: no chat platform, storage engine or tool protocol (DESIGN §2)"},
		{[]string{"scheduler/...", "model/..."}, platforms,
			"the scheduler and the models know no chat platform; results reach chats through Outbound"},
		{[]string{"core/...", "scheduler/...", "console/...", "tools/...", "acp/...", "adapter/..."}, []string{module + "config", "gopkg.in/yaml.v3"},
			"components take their own options; reading the config file is the application's (bot, wiring)"},
		{[]string{"core/...", "scheduler/...", "model/...", "tools/...", "acp/...", "adapter/...", "store/...", "console/..."}, []string{module + "bot", module + "cmd"},
			"the application imports its components, never the other way"},
		{[]string{"bot/..."}, []string{module + "adapter/discord/discordtest", module + "internal/world", module + "internal/rule1", module + "internal/demo", module + "internal/load"},
			"the application carries no test tooling: the tools import it (internal/...)"},
		{[]string{"core/transcript/...", "core/binding/..."}, []string{module + "core/delivery", module + "core/session"},
			"transcripts and bindings are below delivery: Outbound writes them, never the other way"},
		{[]string{"core/delivery/..."}, []string{module + "core/session"},
			"delivery is the send owner below the turns: sessions call it, it calls no session"},
		{[]string{"store/..."}, slices.Concat(platforms, protocols, []string{module + "adapter"}),
			"stores keep the core's records; they know no platform or tool protocol"},
		{[]string{"core/...", "adapter/..."}, []string{module + "acp"},
			"the ACP side is wired to the core by the application; shared nouns (the permission button) live in core"},
		{[]string{"core/..."}, []string{module + "scheduler"},
			"the command layer asks the scheduler through an interface (command.Jobs) filled by the application; shared nouns (hints) live in core/usertext"},
	}
	for _, r := range rules {
		for rel, p := range pkgs {
			if !slices.ContainsFunc(r.from, func(f string) bool { return under(rel, f) }) {
				continue
			}
			for _, d := range p.Deps {
				if hasPrefix(d, r.never) {
					t.Errorf("%s depends on %s: %s", rel, d, r.reason)
				}
			}
		}
	}
}

// TestMainHasFlagsAndSubcommandsOnly: cmd/bot parses flags and runs
// subcommands; it wires no component itself (the application, bot, does),
// so it imports none of those the application builds.
func TestMainHasFlagsAndSubcommandsOnly(t *testing.T) {
	p, ok := load(t)["cmd/bot"]
	if !ok {
		t.Fatal("cmd/bot not listed")
	}
	wired := []string{"core/delivery", "core/authz", "core/command", "core/transcript", "core/platform", "adapter/matrix",
		"acp", "tools", "model", "console", "metrics"}
	imported := false
	for _, imp := range p.Imports {
		rel, ours := strings.CutPrefix(imp, module)
		if !ours {
			continue
		}
		imported = imported || rel == "bot"
		if slices.ContainsFunc(wired, func(w string) bool { return under(rel, w+"/...") }) {
			t.Errorf("cmd/bot imports %s: wiring is the application's (bot)", rel)
		}
	}
	if !imported {
		t.Error("cmd/bot does not import the application (bot)")
	}
}

// TestTheEmulatorImportsNothingOfTheBot: discordtest stands in for
// Discord; a test double that shares the bot's code shares its blind spots.
func TestTheEmulatorImportsNothingOfTheBot(t *testing.T) {
	pkgs := load(t)
	p, ok := pkgs["adapter/discord/discordtest"]
	if !ok {
		t.Fatal("adapter/discord/discordtest not listed")
	}
	for _, d := range p.Deps {
		if strings.HasPrefix(d, module) {
			t.Errorf("the emulator depends on %s", d)
		}
	}
}

// TestOneImporterPerOutsideWorld: each platform, storage engine and tool
// protocol SDK is imported (by production code) only by the package that
// owns it; tests may import them to look at what they did.
func TestOneImporterPerOutsideWorld(t *testing.T) {
	pkgs := load(t)
	rules := []struct {
		lib    string
		owners []string
		reason string
	}{
		{"github.com/bwmarrin/discordgo", []string{"adapter/discord/..."}, "adapter/discord is the only Discord client"},
		{"maunium.net/go/mautrix", []string{"adapter/matrix/..."}, "adapter/matrix is the only Matrix client"},
		{"go.etcd.io/bbolt", []string{"store/bolt/..."}, "store/bolt owns the bbolt file"},
		{"github.com/jackc/pgx/v5", []string{"store/postgres/..."}, "store/postgres owns the database"},
		{"github.com/blevesearch/bleve/v2", []string{"memory/bleveindex/..."}, "memory/bleveindex owns the recall index files"},
		{"github.com/modelcontextprotocol/go-sdk", []string{"tools/mcp/..."}, "tools/mcp is the only MCP client"},
		{"github.com/coder/acp-go-sdk", []string{"acp/..."}, "acp is the only ACP client"},
	}
	for _, r := range rules {
		seen := false
		for rel, p := range pkgs {
			for _, imp := range p.Imports {
				if !hasPrefix(imp, []string{r.lib}) {
					continue
				}
				seen = true
				if !slices.ContainsFunc(r.owners, func(o string) bool { return under(rel, o) }) {
					t.Errorf("%s imports %s: %s", rel, imp, r.reason)
				}
			}
		}
		if !seen {
			t.Errorf("no package imports %s: the rule sees no imports (or the library left; drop the row)", r.lib)
		}
	}
}

// TestEveryPackageHasADocComment: a package says what it is for, and its
// invariants, in its doc comment (doc.go by convention).
func TestEveryPackageHasADocComment(t *testing.T) {
	for rel, p := range load(t) {
		if strings.TrimSpace(p.Doc) == "" && rel != strings.TrimSuffix(module, "/") {
			t.Errorf("%s has no package doc comment", rel)
		}
	}
}
