package master

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// maxFacadeMethods bounds *Master: start, stop, leadership, health, the
// worker link and the domains' accessors. A new kind of thing is a domain
// (domains.go) with its own type, not more methods here.
const maxFacadeMethods = 60

// TestFacadeStaysSmall counts the methods declared on *Master, exported or
// not, in the package's source, and fails past maxFacadeMethods.
func TestFacadeStaysSmall(t *testing.T) {
	t.Parallel()
	names, err := receiverMethods(".", "Master")
	if err != nil {
		t.Fatal(err)
	}
	if len(names) > maxFacadeMethods {
		t.Fatalf("*Master has %d methods, the bound is %d: move a kind of thing to a domain "+
			"(domains.go, reached through an accessor) instead of adding methods to the facade: %s",
			len(names), maxFacadeMethods, strings.Join(names, " "))
	}
	// The count must see the facade at all: the accessors are on it.
	for _, want := range []string{"Start", "Stop", "Tasks", "Nodes", "Accounts"} {
		if !slices.Contains(names, want) {
			t.Fatalf("method %s not found on *Master (found %s): the count reads the wrong files", want, names)
		}
	}
	t.Logf("*Master has %d methods (bound %d)", len(names), maxFacadeMethods)
}

// receiverMethods lists the methods with receiver *typ in dir's non-test Go files.
func receiverMethods(dir, typ string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var names []string
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || len(fd.Recv.List) != 1 {
				continue
			}
			star, ok := fd.Recv.List[0].Type.(*ast.StarExpr)
			if !ok {
				continue
			}
			if id, ok := star.X.(*ast.Ident); ok && id.Name == typ {
				names = append(names, fd.Name.Name)
			}
		}
	}
	sort.Strings(names)
	return names, nil
}
