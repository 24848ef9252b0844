package discordtest

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// specJSON is Discord's OpenAPI description (see openapi/README.md for origin and licence).
//
//go:embed openapi/discord-openapi.json
var specJSON []byte

// Violation is a request the OpenAPI referee (or the emulator itself) would not accept.
type Violation struct {
	Method string
	Path   string
	Kind   string // "unknown-route", "unknown-method", "unknown-query", "unknown-body-field", "unimplemented", "allowed_mentions"
	Detail string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s %s: %s: %s", v.Method, v.Path, v.Kind, v.Detail)
}

// bodyAllowList holds top-level body properties discordgo v0.29.0 sends that the spec does not
// list for the route, but which Discord accepts (or ignores). Keyed by "METHOD template".
var bodyAllowList = map[string][]string{
	// MessageThreadStartComplex always sends invitable (only meaningful for private threads).
	"POST /channels/{channel_id}/messages/{message_id}/threads": {"invitable", "type"},
	// MessageSend marshals sticker_ids/tts/components/embeds even when empty; harmless nulls.
	"POST /channels/{channel_id}/messages": {"sticker_ids"},
	// discordgo's MessageEdit has untagged ID and Channel fields that are marshalled as "ID" and
	// "Channel"; Discord ignores unknown fields.
	"PATCH /channels/{channel_id}/messages/{message_id}": {"ID", "Channel"},
	// ChannelEdit: discordgo's ChannelEdit struct carries fields shared by channels and threads.
	"PATCH /channels/{channel_id}": {"invitable"},
}

type specOp struct {
	query map[string]bool
	props map[string]bool // nil: no body schema with properties (not checked)
}

type specPath struct {
	segs []string
	ops  map[string]*specOp // upper-case method
}

type spec struct{ paths []specPath }

// loadSpec parses the embedded spec once per process; the result is read-only.
var loadSpec = sync.OnceValues(func() (*spec, error) { return parseSpec(specJSON) })

type rawSchema struct {
	Ref        string                     `json:"$ref"`
	Type       any                        `json:"type"`
	Properties map[string]json.RawMessage `json:"properties"`
	Items      *rawSchema                 `json:"items"`
	AnyOf      []*rawSchema               `json:"anyOf"`
	OneOf      []*rawSchema               `json:"oneOf"`
	AllOf      []*rawSchema               `json:"allOf"`
}

type rawParam struct {
	Ref  string `json:"$ref"`
	Name string `json:"name"`
	In   string `json:"in"`
}

type rawOp struct {
	Parameters  []rawParam `json:"parameters"`
	RequestBody *struct {
		Content map[string]struct {
			Schema *rawSchema `json:"schema"`
		} `json:"content"`
	} `json:"requestBody"`
}

func parseSpec(b []byte) (*spec, error) {
	var doc struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas    map[string]*rawSchema `json:"schemas"`
			Parameters map[string]rawParam   `json:"parameters"`
		} `json:"components"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("discordtest: parse OpenAPI spec: %w", err)
	}
	resolveParam := func(p rawParam) rawParam {
		if p.Ref != "" {
			return doc.Components.Parameters[strings.TrimPrefix(p.Ref, "#/components/parameters/")]
		}
		return p
	}
	var props func(s *rawSchema, depth int, out map[string]bool) bool
	props = func(s *rawSchema, depth int, out map[string]bool) bool {
		if s == nil || depth > 8 {
			return false
		}
		if s.Ref != "" {
			return props(doc.Components.Schemas[strings.TrimPrefix(s.Ref, "#/components/schemas/")], depth+1, out)
		}
		found := false
		for k := range s.Properties {
			out[k] = true
			found = true
		}
		for _, group := range [][]*rawSchema{s.AnyOf, s.OneOf, s.AllOf} {
			for _, sub := range group {
				if props(sub, depth+1, out) {
					found = true
				}
			}
		}
		if s.Items != nil && props(s.Items, depth+1, out) {
			found = true
		}
		return found
	}
	sp := &spec{}
	for path, item := range doc.Paths {
		p := specPath{segs: splitPath(path), ops: map[string]*specOp{}}
		var shared []rawParam
		if raw, found := item["parameters"]; found {
			_ = json.Unmarshal(raw, &shared)
		}
		for method, raw := range item {
			if method == "parameters" {
				continue
			}
			var o rawOp
			if err := json.Unmarshal(raw, &o); err != nil {
				return nil, fmt.Errorf("discordtest: parse %s %s: %w", method, path, err)
			}
			op := &specOp{query: map[string]bool{}}
			for _, prm := range append(append([]rawParam(nil), shared...), o.Parameters...) {
				if prm = resolveParam(prm); prm.In == "query" {
					op.query[prm.Name] = true
				}
			}
			if o.RequestBody != nil {
				if c, found := o.RequestBody.Content["application/json"]; found {
					set := map[string]bool{}
					if props(c.Schema, 0, set) {
						op.props = set
					}
				}
			}
			p.ops[strings.ToUpper(method)] = op
		}
		sp.paths = append(sp.paths, p)
	}
	return sp, nil
}

// match finds the spec path for segs, preferring the most literal segments.
func (s *spec) match(segs []string) *specPath {
	var best *specPath
	bestLit := -1
	for i := range s.paths {
		p := &s.paths[i]
		if len(p.segs) != len(segs) {
			continue
		}
		lit := 0
		okay := true
		for j, ps := range p.segs {
			if strings.HasPrefix(ps, "{") {
				continue
			}
			if ps != segs[j] {
				okay = false
				break
			}
			lit++
		}
		if okay && lit > bestLit {
			best, bestLit = p, lit
		}
	}
	return best
}

func templateOf(p *specPath) string { return "/" + strings.Join(p.segs, "/") }

// checkSpec records violations of the OpenAPI description for req.
func (e *Emulator) checkSpec(req Request) {
	sp, err := loadSpec()
	var vs []Violation
	add := func(kind, detail string) {
		vs = append(vs, Violation{Method: req.Method, Path: req.Path, Kind: kind, Detail: detail})
	}
	if err != nil {
		add("referee", err.Error())
	} else if p := sp.match(splitPath(req.Path)); p == nil {
		add("unknown-route", "no path template in the spec matches")
	} else if op := p.ops[req.Method]; op == nil {
		add("unknown-method", "spec path "+templateOf(p)+" has no "+req.Method)
	} else {
		var qs []string
		for k := range req.Query {
			if !op.query[k] {
				qs = append(qs, k)
			}
		}
		sort.Strings(qs)
		for _, k := range qs {
			add("unknown-query", k)
		}
		for _, k := range bodyFields(jsonPart(req)) {
			if op.props != nil && !op.props[k] && !allowed(req.Method+" "+templateOf(p), k) {
				add("unknown-body-field", k)
			}
		}
	}
	if len(vs) == 0 {
		return
	}
	for _, v := range vs {
		e.logf("discordtest: referee: %s", v)
	}
	e.mu.Lock()
	e.referee = append(e.referee, vs...)
	e.broadcastLocked()
	e.mu.Unlock()
}

func allowed(key, field string) bool {
	for _, f := range bodyAllowList[key] {
		if f == field {
			return true
		}
	}
	return false
}

// bodyFields returns the sorted top-level property names of a JSON object body, or of each element
// of an array body. Non-JSON bodies yield nothing.
func bodyFields(body []byte) []string {
	set := map[string]bool{}
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) == nil {
		for k := range obj {
			set[k] = true
		}
	} else {
		var arr []map[string]json.RawMessage
		if json.Unmarshal(body, &arr) == nil {
			for _, o := range arr {
				for k := range o {
					set[k] = true
				}
			}
		}
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Violations returns the referee's findings so far: requests whose route, method, query parameter
// names or top-level body properties the OpenAPI description does not allow, and routes the
// emulator does not implement.
func (e *Emulator) Violations() []Violation {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Violation(nil), e.referee...)
}

// ResetViolations clears the recorded violations (for tests that provoke one on purpose).
func (e *Emulator) ResetViolations() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.referee = nil
}
