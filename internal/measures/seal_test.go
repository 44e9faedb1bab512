package measures

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The seal (issue 27): what a public package exports names only public
// types, so an embedder can spell every type the API hands out, and
// nothing internal becomes API by accident.

// importNames maps the names a file imports packages under to their
// paths: an explicit name, or else the path's last element.
func importNames(f *ast.File) map[string]string {
	m := map[string]string{}
	for _, imp := range f.Imports {
		p, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			continue
		}
		name := path.Base(p)
		if imp.Name != nil {
			name = imp.Name.Name
		}
		m[name] = p
	}
	return m
}

// internalOf returns the module-internal package a path names, or "".
func internalOf(p string) string {
	if rel, ok := strings.CutPrefix(p, module+"/"); ok && isInternal(rel) {
		return rel
	}
	return ""
}

// mentions lists the internal packages' types that e names, as
// "internal/pkg.Type".
func mentions(e ast.Node, imports map[string]string) []string {
	var out []string
	if e == nil {
		return nil
	}
	ast.Inspect(e, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); ok {
			if in := internalOf(imports[x.Name]); in != "" {
				out = append(out, in+"."+sel.Sel.Name)
			}
		}
		return true
	})
	return out
}

// exportedFields returns the exported parts of a struct or interface type
// (fields and methods), and every other type expression whole.
func exportedParts(e ast.Expr) []ast.Node {
	var list *ast.FieldList
	switch x := e.(type) {
	case *ast.StructType:
		list = x.Fields
	case *ast.InterfaceType:
		list = x.Methods
	default:
		return []ast.Node{e}
	}
	var out []ast.Node
	for _, fld := range list.List {
		if len(fld.Names) == 0 {
			// Embedded: its promoted members are API.
			out = append(out, fld.Type)
			continue
		}
		for _, n := range fld.Names {
			if n.IsExported() {
				out = append(out, fld.Type)
				break
			}
		}
	}
	return out
}

// sealLeaks lists every exported function, method, field, type, variable
// or constant of a public package whose declaration mentions a type of an
// internal package, as "dir: Name mentions internal/pkg.Type".
func sealLeaks(files []goFile) []string {
	seen := map[string]bool{}
	var out []string
	add := func(dir, name string, found []string) {
		for _, m := range found {
			line := dir + ": " + name + " mentions " + m
			if !seen[line] {
				seen[line] = true
				out = append(out, line)
			}
		}
	}
	for _, f := range files {
		if isInternal(f.dir) {
			continue
		}
		imports := importNames(f.file)
		for _, decl := range f.file.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				name := d.Name.Name
				if d.Recv != nil {
					recv := recvName(d.Recv.List[0].Type)
					if !ast.IsExported(recv) {
						continue
					}
					name = recv + "." + name
				}
				add(f.dir, name, mentions(d.Type, imports))
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								// Its declared type; a value is checked when it
								// spells its type (a composite literal). A
								// constant or sentinel taken from an internal
								// package names a value, not a type.
								add(f.dir, n.Name, mentions(s.Type, imports))
								for _, v := range s.Values {
									if c, ok := v.(*ast.CompositeLit); ok {
										add(f.dir, n.Name, mentions(c.Type, imports))
									}
								}
							}
						}
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						for _, part := range exportedParts(s.Type) {
							add(f.dir, s.Name.Name, mentions(part, imports))
						}
					}
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// knownLeaks are the leaks the seal has not closed yet (none since
// runtime/plugin moved to internal/plugin), each to be removed
// from here as it is closed: the test fails on a new leak and on a listed
// one that is gone, so the list only shrinks and stays true.
var knownLeaks = map[string]bool{}

// TestSealNoInternalTypesInPublicAPI: no exported declaration of a public
// package mentions a type of an internal package.
func TestSealNoInternalTypesInPublicAPI(t *testing.T) {
	leaks := sealLeaks(libraryFiles(t))
	found := map[string]bool{}
	for _, l := range leaks {
		found[l] = true
		if !knownLeaks[l] {
			t.Errorf("%s: public API must not name an internal type (move the type to a public leaf, or keep the declaration unexported)", l)
		}
	}
	for l := range knownLeaks {
		if !found[l] {
			t.Errorf("known leak %q is closed: remove it from knownLeaks", l)
		}
	}
	t.Logf("public declarations naming internal types: %d (known, not yet closed: %d)", len(leaks), len(knownLeaks))
}

// TestSealFrontEndsImportPublicOnly: the CLI and the front ends build on
// the public packages, as any embedder's program would (test files
// aside: they may use the internal test support). The front ends live
// under internal/frontend, so that they are not API, and the CLI may
// import them; nothing else internal.
func TestSealFrontEndsImportPublicOnly(t *testing.T) {
	const frontends = "internal/frontend"
	for _, top := range []string{"cmd", frontends} {
		err := filepath.WalkDir(filepath.Join(root, top), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			for _, imp := range f.Imports {
				ip, _ := strconv.Unquote(imp.Path.Value)
				in := internalOf(ip)
				if in == "" || (top == "cmd" && (in == frontends || strings.HasPrefix(in, frontends+"/"))) {
					continue
				}
				rel, _ := filepath.Rel(root, p)
				t.Errorf("%s imports %s: the CLI and the front ends use the public packages only (add a narrow method on the root)", filepath.ToSlash(rel), in)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("walk %s: %v", top, err)
		}
	}
}

// rootDir is the root package, the embedding API.
const rootDir = "runtime/deploy"

// TestSealRootExportsAreDocumented: every export of the root (function,
// method of an exported type, type, variable, constant, and every
// exported field or interface method) has a doc comment; a grouped
// constant or variable may share its group's.
func TestSealRootExportsAreDocumented(t *testing.T) {
	var missing []string
	for _, f := range libraryFiles(t) {
		if f.dir != rootDir {
			continue
		}
		for _, decl := range f.file.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				name := d.Name.Name
				if d.Recv != nil {
					recv := recvName(d.Recv.List[0].Type)
					if !ast.IsExported(recv) {
						continue
					}
					name = recv + "." + name
				}
				if d.Doc == nil {
					missing = append(missing, name)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() && s.Doc == nil && d.Doc == nil && s.Comment == nil {
								missing = append(missing, n.Name)
							}
						}
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						if s.Doc == nil && d.Doc == nil {
							missing = append(missing, s.Name.Name)
						}
						missing = append(missing, undocumentedMembers(s.Name.Name, s.Type)...)
					}
				}
			}
		}
	}
	for _, m := range missing {
		t.Errorf("%s: %s has no doc comment", rootDir, m)
	}
}

// undocumentedMembers lists a struct's exported fields or an interface's
// methods without a doc or line comment.
func undocumentedMembers(typ string, e ast.Expr) []string {
	var list *ast.FieldList
	switch x := e.(type) {
	case *ast.StructType:
		list = x.Fields
	case *ast.InterfaceType:
		list = x.Methods
	default:
		return nil
	}
	var out []string
	for _, fld := range list.List {
		if fld.Doc != nil || fld.Comment != nil {
			continue
		}
		for _, n := range fld.Names {
			if n.IsExported() {
				out = append(out, typ+"."+n.Name)
			}
		}
		if len(fld.Names) == 0 {
			if n := recvName(fld.Type); ast.IsExported(n) {
				out = append(out, typ+"."+n)
			}
		}
	}
	return out
}
