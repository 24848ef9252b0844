package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// parse returns the top-level mapping of the single YAML document in data, or nil for an empty file.
func parse(name string, data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, syntaxError(name, data, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, syntaxError(name, data, err)
		}
		return nil, &Error{File: name, Line: extra.Line,
			Msg: "found a second YAML document (after ---); put everything in one document"}
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return nil, nil
		}
		root = root.Content[0]
	}
	if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
		return nil, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, &Error{File: name, Line: root.Line,
			Msg: "the top level must be a mapping of sections (discord:, agents:, models:, ...); see config.example.yaml"}
	}
	return root, nil
}

// syntaxError turns a yaml.v3 parse error ("yaml: line 3: did not find expected key") into an *Error
// with the line as a field.
func syntaxError(name string, data []byte, err error) *Error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if n, after, ok := strings.Cut(rest, ": "); ok {
			if l, err := strconv.Atoi(n); err == nil {
				line, msg = l, after
			}
		}
	}
	hint := "check indentation and quoting"
	if bytes.Contains(data, []byte("\t")) {
		hint = "YAML indents with spaces, not tabs"
	}
	return &Error{File: name, Line: line, Msg: "YAML syntax error: " + msg + " (" + hint + ")"}
}

// collectSecrets returns the expanded values of every key named token, apiKey or dsn (a connection
// string carries a password), and of every ${VAR} under a key named env, anywhere in the tree,
// so that no message can echo them even when the file is otherwise wrong.
func collectSecrets(n *yaml.Node, env func(string) (string, bool)) []string {
	var out []string
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if (k.Value == "token" || k.Value == "apiKey" || k.Value == "dsn") && v.Kind == yaml.ScalarNode {
					if s, err := expand(v.Value, env, nil); err == nil {
						out = append(out, s) // the value itself when it references no variable
					} else {
						out = append(out, v.Value)
					}
				}
				if (k.Value == "env" || k.Value == "headers") && v.Kind == yaml.MappingNode {
					// mcp.servers.*: every value may be a credential.
					for j := 1; j < len(v.Content); j += 2 {
						if c := v.Content[j]; c.Kind == yaml.ScalarNode {
							if s, err := expand(c.Value, env, nil); err == nil {
								out = append(out, s)
							} else {
								out = append(out, c.Value)
							}
						}
					}
				}
				walk(v)
			}
		case yaml.SequenceNode, yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c)
			}
		}
	}
	walk(n)
	return out
}

// decoder walks the node tree into Go values by reflection over the `yaml` struct tags. It supports
// exactly the kinds Config uses: structs, string, bool, int, float64, time.Duration, slices and
// map[string]T. It stops at the first problem.
type decoder struct {
	src *source
	env func(string) (string, bool)
}

// defaulter is implemented by list and map element types that have per-element defaults.
type defaulter interface{ setDefaults() }

func (d *decoder) decodeRoot(root *yaml.Node, cfg *Config) error {
	return d.decode("", root, reflect.ValueOf(cfg).Elem())
}

func (d *decoder) errAt(path string, n *yaml.Node, format string, args ...any) *Error {
	e := d.src.errAt(path, format, args...)
	e.Line = n.Line
	return e
}

func (d *decoder) decode(path string, n *yaml.Node, v reflect.Value) error {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if _, ok := d.src.lines[path]; !ok {
		d.src.lines[path] = n.Line
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil // absent: keep the default
	}
	switch {
	case v.Type() == reflect.TypeFor[time.Duration]():
		s, ok, err := d.scalar(path, n, "a duration such as \"90s\" or \"1h30m\"")
		if err != nil || !ok {
			return err
		}
		dur, perr := time.ParseDuration(s)
		if perr != nil {
			return d.errAt(path, n, "%s is not a duration: write it like \"90s\", \"10m\" or \"1h30m\" (units ns, us, ms, s, m, h)", show(s))
		}
		v.SetInt(int64(dur))
	case v.Kind() == reflect.String:
		s, _, err := d.scalar(path, n, "a string")
		if err != nil {
			return err
		}
		v.SetString(s)
	case v.Kind() == reflect.Bool:
		s, ok, err := d.scalar(path, n, "true or false")
		if err != nil || !ok {
			return err
		}
		switch strings.ToLower(s) {
		case "true":
			v.SetBool(true)
		case "false":
			v.SetBool(false)
		default:
			return d.errAt(path, n, "expected true or false, got %s", show(s))
		}
	case v.Kind() == reflect.Int:
		s, ok, err := d.scalar(path, n, "a whole number")
		if err != nil || !ok {
			return err
		}
		i, perr := strconv.Atoi(s)
		if perr != nil {
			return d.errAt(path, n, "expected a whole number (e.g. 4), got %s", show(s))
		}
		v.SetInt(int64(i))
	case v.Kind() == reflect.Float64:
		s, ok, err := d.scalar(path, n, "a number")
		if err != nil || !ok {
			return err
		}
		f, perr := strconv.ParseFloat(s, 64)
		if perr != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return d.errAt(path, n, "expected a number (e.g. 24 or 0.5), got %s", show(s))
		}
		v.SetFloat(f)
	case v.Kind() == reflect.Slice:
		return d.decodeSlice(path, n, v)
	case v.Kind() == reflect.Map:
		return d.decodeMap(path, n, v)
	case v.Kind() == reflect.Struct:
		return d.decodeStruct(path, n, v)
	default:
		panic("config: unsupported field type " + v.Type().String() + " at " + path)
	}
	return nil
}

// scalar returns the expanded value of a scalar node. ok is false when the value is empty after
// expansion, which for non-string fields means "keep the default".
func (d *decoder) scalar(path string, n *yaml.Node, want string) (s string, ok bool, err error) {
	if n.Kind != yaml.ScalarNode {
		return "", false, d.errAt(path, n, "expected %s, got %s", want, kindName(n))
	}
	var unset []string
	s, err = expand(n.Value, d.env, &unset)
	if err != nil {
		return "", false, d.errAt(path, n, "%v", err)
	}
	if len(unset) > 0 {
		d.src.unset[path] = unset
	}
	return s, s != "", nil
}

func (d *decoder) decodeSlice(path string, n *yaml.Node, v reflect.Value) error {
	if n.Kind != yaml.SequenceNode {
		return d.errAt(path, n, "expected a list (e.g. [a, b] or one \"- item\" per line), got %s", kindName(n))
	}
	if len(n.Content) == 0 {
		v.SetZero() // an empty list is the same as no list
		return nil
	}
	out := reflect.MakeSlice(v.Type(), 0, len(n.Content))
	for i, item := range n.Content {
		ipath := fmt.Sprintf("%s[%d]", path, i)
		if item.Kind == yaml.ScalarNode && item.ShortTag() == "!!null" {
			return d.errAt(ipath, item, "empty list item; remove the \"-\" or give it a value")
		}
		elem := newElem(v.Type().Elem())
		if err := d.decode(ipath, item, elem); err != nil {
			return err
		}
		out = reflect.Append(out, elem)
	}
	v.Set(out)
	return nil
}

func (d *decoder) decodeMap(path string, n *yaml.Node, v reflect.Value) error {
	if n.Kind != yaml.MappingNode {
		return d.errAt(path, n, "expected a mapping of name: settings, got %s", kindName(n))
	}
	out := reflect.MakeMapWithSize(v.Type(), len(n.Content)/2)
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return d.errAt(path, k, "names in this mapping must be plain words")
		}
		kpath := path + "." + k.Value
		if line, dup := seen[k.Value]; dup {
			return d.errAt(kpath, k, "defined twice (first on line %d); keep one", line)
		}
		seen[k.Value] = k.Line
		d.src.lines[kpath] = k.Line // a missing key inside is reported at its parent's key
		elem := newElem(v.Type().Elem())
		if err := d.decode(kpath, val, elem); err != nil {
			return err
		}
		out.SetMapIndex(reflect.ValueOf(k.Value), elem)
	}
	v.Set(out)
	return nil
}

func newElem(t reflect.Type) reflect.Value {
	p := reflect.New(t)
	if def, ok := p.Interface().(defaulter); ok {
		def.setDefaults()
	}
	return p.Elem()
}

func (d *decoder) decodeStruct(path string, n *yaml.Node, v reflect.Value) error {
	if n.Kind != yaml.MappingNode {
		return d.errAt(path, n, "expected a mapping of key: value, got %s", kindName(n))
	}
	fields := map[string]int{}
	var names []string
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if name := f.Tag.Get("yaml"); name != "" && name != "-" && f.IsExported() {
			fields[name] = i
			names = append(names, name)
		}
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		key := k.Value
		kpath := key
		if path != "" {
			kpath = path + "." + key
		}
		if k.Kind != yaml.ScalarNode {
			return d.errAt(path, k, "keys must be plain words")
		}
		idx, known := fields[key]
		if !known {
			return d.errAt(kpath, k, "unknown key%s; the keys allowed %s are: %s",
				suggest(key, names), where(path), strings.Join(names, ", "))
		}
		if line, dup := seen[key]; dup {
			return d.errAt(kpath, k, "defined twice (first on line %d); keep one", line)
		}
		seen[key] = k.Line
		d.src.lines[kpath] = k.Line
		if err := d.decode(kpath, val, v.Field(idx)); err != nil {
			return err
		}
	}
	return nil
}

func where(path string) string {
	if path == "" {
		return "at the top level"
	}
	return "under " + path
}

// suggest proposes a known key close to an unknown one (a typo or wrong capitalisation).
func suggest(key string, names []string) string {
	best, bestDist := "", 3
	for _, name := range names {
		dist := editDistance(strings.ToLower(key), strings.ToLower(name))
		if dist < bestDist {
			best, bestDist = name, dist
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!int", "!!float":
			return "a number"
		case "!!bool":
			return "true/false"
		}
		return "a string"
	}
	return "something else"
}

// expand replaces ${VAR} and ${VAR:-default} in s using env. The default applies when VAR is unset or
// empty. "$${" is a literal "${"; any other "$" is kept as is. When unset is not nil, the names of
// variables that were unset or empty and had no default are appended to it.
func expand(s string, env func(string) (string, bool), unset *[]string) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if strings.HasPrefix(s[i:], "$${") {
			b.WriteString("${")
			i += 3
			continue
		}
		if !strings.HasPrefix(s[i:], "${") {
			b.WriteByte(s[i])
			i++
			continue
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", fmt.Errorf("\"${\" without a closing \"}\": write ${NAME} or ${NAME:-default} (or $${ for a literal ${)")
		}
		expr := s[i+2 : i+end]
		name, def, hasDef := strings.Cut(expr, ":-")
		if !validEnvName(name) {
			return "", fmt.Errorf("%s is not a valid environment variable reference: write ${NAME} or ${NAME:-default}, NAME being letters, digits and _", show("${"+expr+"}"))
		}
		val, _ := env(name)
		if val == "" {
			if hasDef {
				val = def
			} else if unset != nil && !slices.Contains(*unset, name) {
				*unset = append(*unset, name)
			}
		}
		b.WriteString(val)
		i += end + 1
	}
	return b.String(), nil
}

func validEnvName(name string) bool {
	if name == "" || (name[0] >= '0' && name[0] <= '9') {
		return false
	}
	for _, r := range name {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}
