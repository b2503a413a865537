// Command codeshape prints the shape of the code base that the redesign of
// issue 18 is measured by: lines per package, the longest files and
// functions, and the internal import graph's levels and hubs. Tests are
// left out: the bar is on the code that ships. Run it from the module root,
// on any commit, to compare two of them (bench/codeshape.sh does both).
package main

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

type pkg struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Imports    []string
}

func main() {
	top := 20
	pkgs, err := listPackages()
	if err != nil {
		fmt.Fprintln(os.Stderr, "codeshape:", err)
		os.Exit(1)
	}
	module := modulePath(pkgs)
	type count struct {
		name  string
		lines int
	}
	var perPkg, files, funcs []count
	total := 0
	for _, p := range pkgs {
		short := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		n := 0
		for _, f := range p.GoFiles {
			path := filepath.Join(p.Dir, f)
			fl, fn, err := measure(path)
			if err != nil {
				fmt.Fprintln(os.Stderr, "codeshape:", err)
				os.Exit(1)
			}
			n += fl
			rel := filepath.Join(short, f)
			files = append(files, count{rel, fl})
			for name, l := range fn {
				funcs = append(funcs, count{rel + ": " + name, l})
			}
		}
		total += n
		perPkg = append(perPkg, count{short, n})
	}
	byLines := func(c []count) {
		sort.Slice(c, func(i, j int) bool {
			if c[i].lines != c[j].lines {
				return c[i].lines > c[j].lines
			}
			return c[i].name < c[j].name
		})
	}
	byLines(perPkg)
	byLines(files)
	byLines(funcs)
	fmt.Printf("## lines per package (non-test .go; %d packages, %d lines)\n", len(perPkg), total)
	for _, c := range perPkg {
		fmt.Printf("%6d  %s\n", c.lines, c.name)
	}
	over := func(c []count, limit int) int {
		n := 0
		for _, x := range c {
			if x.lines > limit {
				n++
			}
		}
		return n
	}
	fmt.Printf("\n## longest files (%d over 500 lines)\n", over(files, 500))
	for _, c := range files[:min(top, len(files))] {
		fmt.Printf("%6d  %s\n", c.lines, c.name)
	}
	fmt.Printf("\n## longest functions (%d over 80 lines)\n", over(funcs, 80))
	for _, c := range funcs[:min(top, len(funcs))] {
		fmt.Printf("%6d  %s\n", c.lines, c.name)
	}
	imports(pkgs, module)
}

// measure counts a file's lines and the lines of each function in it.
func measure(path string) (int, map[string]int, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return 0, nil, err
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, 0)
	if err != nil {
		return 0, nil, err
	}
	funcs := map[string]int{}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		name := fd.Name.Name
		if fd.Recv != nil && len(fd.Recv.List) == 1 {
			name = recvName(fd.Recv.List[0].Type) + "." + name
		}
		funcs[name] = fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
	}
	return strings.Count(string(src), "\n"), funcs, nil
}

func recvName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return recvName(t.X)
	case *ast.IndexExpr:
		return recvName(t.X)
	case *ast.Ident:
		return t.Name
	}
	return "?"
}

// imports prints the internal import graph's levels (a package's level is
// one more than the highest level it imports; leaves are 0) and its hubs:
// the packages most imported, and those that import most.
func imports(pkgs []pkg, module string) {
	internal := map[string][]string{}
	for _, p := range pkgs {
		var deps []string
		for _, i := range p.Imports {
			if strings.HasPrefix(i, module+"/") {
				deps = append(deps, i)
			}
		}
		internal[p.ImportPath] = deps
	}
	level := map[string]int{}
	var depth func(string, map[string]bool) int
	depth = func(p string, seen map[string]bool) int {
		if l, ok := level[p]; ok {
			return l
		}
		if seen[p] {
			return 0 // a cycle cannot compile; guard anyway
		}
		seen[p] = true
		l := 0
		for _, d := range internal[p] {
			l = max(l, depth(d, seen)+1)
		}
		level[p] = l
		return l
	}
	byLevel := map[int][]string{}
	maxLevel := 0
	for p := range internal {
		l := depth(p, map[string]bool{})
		maxLevel = max(maxLevel, l)
		byLevel[l] = append(byLevel[l], strings.TrimPrefix(p, module+"/"))
	}
	fmt.Printf("\n## import levels (%d packages on %d levels)\n", len(internal), maxLevel+1)
	for l := 0; l <= maxLevel; l++ {
		sort.Strings(byLevel[l])
		fmt.Printf("%2d  %s\n", l, strings.Join(byLevel[l], " "))
	}
	in := map[string]int{}
	for _, deps := range internal {
		for _, d := range deps {
			in[d]++
		}
	}
	type hub struct {
		name    string
		in, out int
	}
	var hubs []hub
	for p, deps := range internal {
		hubs = append(hubs, hub{strings.TrimPrefix(p, module+"/"), in[p], len(deps)})
	}
	top := func(title string, n func(hub) int) {
		sort.Slice(hubs, func(i, j int) bool {
			if n(hubs[i]) != n(hubs[j]) {
				return n(hubs[i]) > n(hubs[j])
			}
			return hubs[i].name < hubs[j].name
		})
		fmt.Printf("\n## hubs: %s\n", title)
		for _, h := range hubs[:min(6, len(hubs))] {
			fmt.Printf("%4d  %s\n", n(h), h.name)
		}
	}
	top("most imported (importers)", func(h hub) int { return h.in })
	top("most importing (internal imports)", func(h hub) int { return h.out })
}

func listPackages() ([]pkg, error) {
	// Only the product: the module's packages outside test/ and bench/.
	cmd := exec.Command("go", "list", "-json", "./cmd/...", "./internal/...")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(out)
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list output: %w", err)
		}
		pkgs = append(pkgs, p)
	}
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	return pkgs, nil
}

// modulePath is the longest common prefix ending at the module's root,
// taken from the cmd package's import path.
func modulePath(pkgs []pkg) string {
	for _, p := range pkgs {
		if i := strings.Index(p.ImportPath, "/cmd/"); i >= 0 {
			return p.ImportPath[:i]
		}
		if i := strings.Index(p.ImportPath, "/internal/"); i >= 0 {
			return p.ImportPath[:i]
		}
	}
	return ""
}
