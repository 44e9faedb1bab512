package plugin

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// abiFiles are the files of this package that belong to one ABI; every
// other non-test file is the core, which must not tell the ABIs apart.
var abiFiles = []string{"abi.go", "abi_dsh.go", "abi_dsh_call.go", "abi_dsh_host.go", "community.go", "community_host.go"}

// TestCoreKnowsNoABI: the lifecycle is one code path for every ABI. Outside
// the ABIs' own files nothing compares the plugin's ABI, names an ABI
// implementation or asks whether a plugin is an Extism one: each such
// branch belongs behind the abi interface (abi.go). It counts them; the
// count must be 0.
func TestCoreKnowsNoABI(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var branches []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || slices.Contains(abiFiles, name) {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			var what string
			switch n := n.(type) {
			case *ast.Ident:
				switch n.Name {
				case "isExtism", "dshABI", "extismABI", "ABIHyperMCPv1", "ABIHyperMCPv2", "ABIMCPRun", "extismOf", "extismHost", "dshHost":
					what = n.Name
				}
			case *ast.BinaryExpr:
				for _, side := range []ast.Expr{n.X, n.Y} {
					if sel, ok := side.(*ast.SelectorExpr); ok && sel.Sel.Name == "abi" {
						what = "a comparison of .abi"
					}
				}
			}
			if what != "" {
				branches = append(branches, fset.Position(n.Pos()).String()+": "+what)
			}
			return true
		})
	}
	if len(branches) != 0 {
		t.Errorf("%d ABI branches in the core:\n%s", len(branches), strings.Join(branches, "\n"))
	}
}
