package lint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// rule forbids packages matching pkg from importing anything that matches a
// forbid pattern, unless it also matches an allow pattern.
//
// Patterns are relative to the module path:
//
//	"."             the module root package (the public Go API)
//	"checkpoint"    exactly that package
//	"connectors/..." that package and every package below it
//	"..."           every package of the module
//	"third-party"   any package outside the module and the standard library
//
// The standard library is never forbidden. Production imports are checked
// transitively (a package may not reach a forbidden package through another
// one); test imports only directly, and only by rules with tests set.
type rule struct {
	pkg    string
	forbid []string
	allow  []string
	// skip exempts importing packages from the rule.
	skip []string
	// tests extends the rule to the direct imports of the package's tests.
	tests bool
	why   string
}

// rules are DESIGN.md's dependency directions.
var rules = []rule{
	{
		pkg:    "checkpoint",
		forbid: []string{"...", "third-party"},
		why:    "checkpoint holds the pure protocol cores and imports only the standard library",
	},
	{
		pkg:    "...",
		forbid: []string{"cmd/..."},
		tests:  true,
		why:    "nothing imports cmd",
	},
	{
		pkg:    "checkpoint/store",
		forbid: []string{".", "runtime/...", "state/...", "connector/...", "connectors/...", "sql/..."},
		why:    "checkpoint/store is the durable side of checkpoint; it sits below the engine",
	},
	{
		pkg:    "state/...",
		forbid: []string{".", "runtime/...", "connector/...", "connectors/...", "sql/..."},
		why:    "state backends sit below the runtime that drives them",
	},
	{
		pkg:    "runtime/...",
		forbid: []string{".", "connector/...", "connectors/...", "sql/...", "cmd/..."},
		why:    "the runtime sits below the public API, the connectors and SQL",
	},
	{
		pkg:    "metrics/...",
		forbid: []string{"..."},
		allow:  []string{"metrics/..."},
		why:    "metrics imports no other clink package, so every layer may report to it",
	},
	{
		pkg:    "connector/...",
		forbid: []string{".", "connectors/...", "sql/..."},
		why:    "the connector contracts sit below the connectors that implement them",
	},
	{
		pkg:    "sql/ast",
		forbid: []string{"..."},
		why:    "the SQL syntax tree imports nothing of clink's",
	},
	{
		pkg:    "sql/types",
		forbid: []string{"..."},
		allow:  []string{"sql/ast", "connector/changelog"},
		why:    "SQL types and values sit below expressions and planning; they share row kinds with connectors through connector/changelog",
	},
	{
		pkg:    "sql/expr",
		forbid: []string{"..."},
		allow:  []string{"sql/ast", "sql/types", "connector/changelog"},
		why:    "expressions compile syntax into evaluators over values; they know nothing of planning or running",
	},
	{
		pkg:    "sql/parser",
		forbid: []string{"..."},
		allow:  []string{"sql/ast"},
		why:    "the parser builds the syntax tree and knows nothing of planning or running",
	},
	{
		pkg:    "sql/catalog",
		forbid: []string{"..."},
		allow:  []string{"sql/ast", "sql/types", "sql/expr", "connector/changelog"},
		why:    "the catalog describes tables and connectors; it builds nothing that runs",
	},
	{
		pkg:    "sql/planner",
		forbid: []string{"..."},
		allow:  []string{"sql/ast", "sql/parser", "sql/types", "sql/expr", "sql/catalog", "connector/changelog"},
		why:    "the planner turns statements into plans; running them is sql/exec's business",
	},
	{
		pkg:    "sql/...",
		forbid: []string{"sql"},
		why:    "package sql is the facade over the SQL packages; none of them imports it",
	},
	{
		pkg:    "connectors/datagen",
		forbid: []string{"..."},
		allow:  []string{"sql/types", "sql/ast", "connector/changelog"},
		why:    "datagen is a pure generator of SQL rows; the SQL layer reads it through clink.FromGenerator",
	},
	{
		pkg:    "connectors/...",
		forbid: []string{"sql/catalog", "sql/planner", "sql/exec", "sql/parser", "sql"},
		why:    "connectors sit below the SQL layer, which wires them; they may use SQL values (sql/types) only",
	},
	{
		pkg:    "...",
		forbid: []string{"internal/..."},
		allow:  []string{"internal/fault/..."},
		skip:   []string{"cmd/...", "internal/..."},
		why:    "internal/ holds test kits, for tests and cmd only; internal/fault is a production fault-point hook",
	},
}

// pkg is the part of `go list -json` output the rules need.
type pkg struct {
	ImportPath   string
	Standard     bool
	DepOnly      bool
	Imports      []string
	Deps         []string
	TestImports  []string
	XTestImports []string
	Module       *struct {
		Path string
		Main bool
	}
	Error *struct{ Err string }
}

// graph is the module's import graph as the rules see it.
type graph struct {
	module string
	// pkgs are the module's own packages, by import path.
	pkgs map[string]*pkg
	// std holds every standard library package any of them reaches.
	std map[string]bool
}

// violation is one forbidden import, named in the message by importer,
// offending import and, when the import is transitive, the direct import it
// comes through.
type violation struct {
	importer, imported, via string
	test                    bool
	why                     string
}

func (v violation) String() string {
	var b strings.Builder
	b.WriteString(v.importer)
	if v.test {
		b.WriteString(" (tests)")
	}
	fmt.Fprintf(&b, " imports %s", v.imported)
	if v.via != "" {
		fmt.Fprintf(&b, " (through %s)", v.via)
	}
	fmt.Fprintf(&b, ": %s", v.why)
	return b.String()
}

func TestImportDirections(t *testing.T) {
	g := loadGraph(t)
	if len(g.pkgs) == 0 {
		t.Fatal("go list found no packages of the module")
	}
	for _, v := range check(g, rules) {
		t.Error(v)
	}
}

// loadGraph runs `go list` once from the module root.
func loadGraph(t *testing.T) *graph {
	t.Helper()
	root := moduleRoot(t)
	statSources(t, root)
	cmd := exec.Command("go", "list", "-e", "-deps",
		"-json=ImportPath,Standard,DepOnly,Imports,Deps,TestImports,XTestImports,Module,Error",
		"./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("running go list in %s: %v\n%s", root, err, stderr.Bytes())
	}
	g, err := parseGraph(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range g.pkgs {
		if p.Error != nil {
			// Compiling is other tests' business; the imports go list could
			// read are still checked.
			t.Logf("go list: %s: %s", p.ImportPath, p.Error.Err)
		}
	}
	return g
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("finding go.mod: none above the test's directory")
		}
		dir = parent
	}
}

// statSources stats every Go file and opens every directory of the module.
// go test caches a passing result keyed on the files the test process
// itself touched; the files go list reads in its own process do not count.
// Without this, a new forbidden import would leave the cached pass standing.
func statSources(t *testing.T, root string) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "testdata" || name == "vendor" ||
				strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".go") || name == "go.mod" {
			_, err := os.Stat(path)
			return err
		}
		return nil
	})
	if err != nil {
		// Another engineer's editor may delete a file mid-walk; the listing
		// below is what counts.
		t.Logf("walking %s: %v", root, err)
	}
}

// parseGraph reads the concatenated JSON objects `go list -json` prints.
func parseGraph(out []byte) (*graph, error) {
	g := &graph{pkgs: map[string]*pkg{}, std: map[string]bool{}}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		p := new(pkg)
		if err := dec.Decode(p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("decoding go list output: %w", err)
		}
		switch {
		case p.Standard:
			g.std[p.ImportPath] = true
		case p.Module != nil && p.Module.Main && !p.DepOnly:
			g.pkgs[p.ImportPath] = p
			g.module = p.Module.Path
		}
	}
	return g, nil
}

// check returns every violation of rules in g, sorted by importer.
func check(g *graph, rules []rule) []violation {
	var vs []violation
	paths := make([]string, 0, len(g.pkgs))
	for path := range g.pkgs {
		paths = append(paths, path)
	}
	slices.Sort(paths)
	for _, path := range paths {
		p := g.pkgs[path]
		for _, r := range rules {
			if !g.matches(r.pkg, path) || g.matchesAny(r.skip, path) {
				continue
			}
			forbidden := func(imp string) bool {
				return imp != path && !g.std[imp] &&
					g.matchesAny(r.forbid, imp) && !g.matchesAny(r.allow, imp)
			}
			for _, dep := range p.Deps {
				if !forbidden(dep) {
					continue
				}
				v := violation{importer: path, imported: dep, why: r.why}
				if !slices.Contains(p.Imports, dep) {
					v.via = g.through(p, dep)
				}
				vs = append(vs, v)
			}
			// Deps lacks imports go list could not resolve; check the direct
			// ones too so a broken package still reports what it names.
			for _, imp := range p.Imports {
				if forbidden(imp) && !slices.Contains(p.Deps, imp) {
					vs = append(vs, violation{importer: path, imported: imp, why: r.why})
				}
			}
			if r.tests {
				for _, imp := range slices.Concat(p.TestImports, p.XTestImports) {
					if forbidden(imp) {
						vs = append(vs, violation{importer: path, imported: imp, test: true, why: r.why})
					}
				}
			}
		}
	}
	return vs
}

// through names p's direct import that leads to dep, for the message.
func (g *graph) through(p *pkg, dep string) string {
	for _, imp := range p.Imports {
		if q, ok := g.pkgs[imp]; ok && slices.Contains(q.Deps, dep) {
			return imp
		}
	}
	for _, imp := range p.Imports {
		if !g.std[imp] {
			if _, ours := g.pkgs[imp]; !ours {
				// Only a third-party package can be left.
				return imp
			}
		}
	}
	return ""
}

func (g *graph) matchesAny(patterns []string, path string) bool {
	return slices.ContainsFunc(patterns, func(pat string) bool { return g.matches(pat, path) })
}

// matches reports whether the import path matches a rule pattern (see rule).
func (g *graph) matches(pattern, path string) bool {
	inModule := path == g.module || strings.HasPrefix(path, g.module+"/")
	switch pattern {
	case "third-party":
		return !inModule && !g.std[path]
	case "...":
		return inModule
	case ".":
		return path == g.module
	}
	if !inModule {
		return false
	}
	rel := strings.TrimPrefix(path, g.module+"/")
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return rel == base || strings.HasPrefix(rel, base+"/")
	}
	return rel == pattern
}

// TestCheckFindsViolations runs the rules on a made-up graph, so that a
// rule that can never fire is noticed before the real tree needs it.
func TestCheckFindsViolations(t *testing.T) {
	const m = "example.com/clink"
	g := &graph{module: m, std: map[string]bool{"fmt": true, "os": true}, pkgs: map[string]*pkg{}}
	add := func(rel string, imports []string, testImports ...string) {
		path := m
		if rel != "." {
			path = m + "/" + rel
		}
		abs := func(s []string) []string {
			var out []string
			for _, i := range s {
				if g.std[i] || strings.Contains(i, ".") {
					out = append(out, i)
				} else {
					out = append(out, m+"/"+i)
				}
			}
			return out
		}
		g.pkgs[path] = &pkg{ImportPath: path, Imports: abs(imports), TestImports: abs(testImports)}
	}
	add("checkpoint", []string{"fmt", "github.com/x/y"})
	add("checkpoint/store", []string{"checkpoint", "internal/fault", "github.com/cockroachdb/pebble/v2/vfs", "state"})
	add("state", []string{"checkpoint", "metrics"})
	add("state/pebble", []string{"state", "github.com/cockroachdb/pebble/v2"})
	add("runtime", []string{"state/pebble", "internal/crash"}, "internal/crash", "cmd/clink/helpers")
	add("runtime/local", []string{"connector"})
	add("connector", []string{"runtime", "connectors/kafka"})
	add("connectors/kafka", []string{"fmt"})
	add("metrics", []string{"os", "checkpoint", "github.com/prometheus/client_golang/prometheus"})
	add("cmd/clink", []string{"internal/crash", "metrics", "runtime", "."})
	add("internal/crash", []string{"internal/fault"})
	add("internal/fault", nil)
	add(".", []string{"runtime", "connector"})
	// Fill in transitive deps the way go list does.
	var deps func(path string, seen map[string]bool)
	deps = func(path string, seen map[string]bool) {
		p, ok := g.pkgs[path]
		if !ok {
			return
		}
		for _, imp := range p.Imports {
			if !seen[imp] {
				seen[imp] = true
				deps(imp, seen)
			}
		}
	}
	for path, p := range g.pkgs {
		seen := map[string]bool{}
		deps(path, seen)
		for d := range seen {
			p.Deps = append(p.Deps, d)
		}
		slices.Sort(p.Deps)
	}

	var got []string
	for _, v := range check(g, rules) {
		// Keep the message up to the reason, with module paths shortened.
		s, _, _ := strings.Cut(v.String(), ":")
		got = append(got, strings.ReplaceAll(s, m+"/", ""))
	}
	want := []string{
		"checkpoint imports github.com/x/y",
		"checkpoint/store imports state",
		"metrics imports checkpoint",
		"runtime imports internal/crash",
		"runtime (tests) imports cmd/clink/helpers",
		"runtime/local imports connector",
		"runtime/local imports connectors/kafka (through connector)",
		"runtime/local imports internal/crash (through connector)",
		"connector imports connectors/kafka",
		"connector imports internal/crash (through runtime)",
		m + " imports internal/crash (through runtime)",
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("violations:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}
