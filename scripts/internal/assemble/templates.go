package assemble

import (
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strings"
)

// templates is one template file of scripts/src: the Lua the generator
// writes around the sources' own code, as named definitions. Each runs from
// its "--@define name [kind ...]" line to the next blank line; the comment
// lines between definitions are for the file's readers. A definition with
// kinds is the name's for those kinds, one without is its default. The
// first definition asked for and missing is kept as err, which Generate
// returns, so that the assembly reads without an error at every step.
type templates struct {
	file string
	defs map[string]map[string]string // name, then kind ("" for the default)
	used map[string]map[string]bool   // the definitions get wrote out, by kind: one never written is a fault (unused)
	err  error
	// depth counts the definitions get is inside, so that one that names
	// itself fails instead of recursing without end.
	depth int
}

// readTemplates reads and parses the template file named file.
func readTemplates(src fs.FS, file string) (*templates, error) {
	text, err := fs.ReadFile(src, file)
	if err != nil {
		return nil, err
	}
	t := &templates{file: file, defs: map[string]map[string]string{}}
	if err := t.parse(strings.Split(strings.TrimRight(string(text), "\n"), "\n")); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return t, nil
}

func (t *templates) parse(lines []string) error {
	var name string
	var kinds, value []string
	for i, line := range append(lines, "") {
		rest, isDefine := strings.CutPrefix(line, "--@define ")
		switch {
		case name != "" && (line == "" || isDefine):
			if err := t.define(name, kinds, value); err != nil {
				return fmt.Errorf("line %d: %w", i+1, err)
			}
			name = ""
		case name != "":
			value = append(value, line)
			continue
		}
		switch {
		case isDefine:
			rest, _, _ = strings.Cut(rest, " --") // a comment on the line
			words := strings.Fields(rest)
			if len(words) == 0 {
				return fmt.Errorf("line %d: --@define without a name", i+1)
			}
			name, kinds, value = words[0], words[1:], nil
		case line != "" && !strings.HasPrefix(line, "--"):
			return fmt.Errorf("line %d: Lua outside a --@define", i+1)
		}
	}
	return nil
}

func (t *templates) define(name string, kinds, value []string) error {
	if len(kinds) == 0 {
		kinds = []string{""}
	}
	if t.defs[name] == nil {
		t.defs[name] = map[string]string{}
	}
	for _, k := range kinds {
		if k != "" && !knownKinds[k] && !constantKind.MatchString(k) {
			return fmt.Errorf("--@define %s %s: no such kind (a field's: time, big, positive, signed; a macro's: script, library; an inline constant's name)", name, k)
		}
		if _, dup := t.defs[name][k]; dup {
			return fmt.Errorf("a second --@define %s %s", name, k)
		}
		t.defs[name][k] = strings.Join(value, "\n")
	}
	return nil
}

// get is the definition of name for kind (or its default), with every
// other definition it names as @other@ written out for the same kind.
func (t *templates) get(name, kind string) string {
	used := kind
	v, ok := t.defs[name][kind]
	if !ok {
		used = ""
		v, ok = t.defs[name][used]
	}
	if !ok || t.depth > 8 {
		t.fail(fmt.Errorf("%s: no --@define %s for %q, or definitions that name each other in a circle", t.file, name, kind))
		return ""
	}
	if t.used == nil {
		t.used = map[string]map[string]bool{}
	}
	if t.used[name] == nil {
		t.used[name] = map[string]bool{}
	}
	t.used[name][used] = true
	t.depth++
	defer func() { t.depth-- }()
	return t.fill(v, kind)
}

// unused is an error naming a definition that get never wrote out, at
// any kind, once every output is written: one nothing asks for any more.
func (t *templates) unused() error {
	var names []string
	for name := range t.defs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if len(t.used[name]) == 0 {
			return fmt.Errorf("%s: --@define %s is never written out: nothing uses it", t.file, name)
		}
	}
	return nil
}

// knownKinds are the kinds a definition may be for: the kinds of a field
// (fieldKind), and a macro's forms. A constant's name (upper case) is the
// kind of an "inline" definition. Any other kind is a misspelling, which
// get would pass over for the default without a word.
var knownKinds = map[string]bool{"time": true, "big": true, "positive": true, "signed": true, script: true, library: true}

var constantKind = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)

// reference is a definition's name, as text names it: @name@.
var reference = regexp.MustCompile(`@[a-z_]+@`)

// fill writes out every @name@ in text that names a definition, as get
// does for kind; any other @...@ is left for the caller.
func (t *templates) fill(text, kind string) string {
	return reference.ReplaceAllStringFunc(text, func(m string) string {
		if name := m[1 : len(m)-1]; t.defs[name] != nil {
			return t.get(name, kind)
		}
		return m
	})
}

// kinds is the kinds name is defined for, sorted.
func (t *templates) kinds(name string) []string {
	var out []string
	for k := range t.defs[name] {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (t *templates) fail(err error) {
	if t.err == nil {
		t.err = err
	}
}
