package views

import (
	"bytes"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"
	"unicode"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// Manual is one page of the manual rendered for the console.
type Manual struct {
	// Title is the text of the page's first level-1 heading.
	Title string
	// HTML is the page's body. It is safe to write as it is: goldmark's
	// default renderer leaves raw HTML out and drops dangerous link targets.
	HTML string
}

// ManualHTML renders a page of the manual, GitHub's Markdown, for /docs. name is the page's path in the docs folder ("tasks.md",
// "zh-CN/tasks.md", "reference/flags.md"), against which its relative links
// resolve. Raw HTML is never written: a <script> in the source shows as
// nothing. Headings get the ids the manual's links name: the anchor
// (<a id="…"></a>) on the line before a heading, else GitHub's slug of its
// text. A link to another page becomes /docs/<page>#<fragment>; a link or
// image leaving the docs folder (the repository's README, a source file)
// keeps its text and loses its target; links with a scheme are left alone.
func ManualHTML(name string, src []byte) (Manual, error) {
	md := goldmark.New(
		// GitHub's Markdown (extension.GFM), but a column's alignment is
		// an align attribute: the console's CSP refuses style attributes.
		goldmark.WithExtensions(extension.Linkify, extension.Strikethrough, extension.TaskList,
			extension.NewTable(extension.WithTableCellAlignMethod(extension.TableCellAlignAttribute))),
		goldmark.WithParserOptions(
			parser.WithAutoHeadingID(),
			parser.WithASTTransformers(util.Prioritized(manualTransformer{name: name}, 100)),
		),
	)
	ctx := parser.NewContext(parser.WithIDs(&slugIDs{seen: map[string]bool{}}))
	doc := md.Parser().Parse(text.NewReader(src), parser.WithContext(ctx))
	var buf bytes.Buffer
	if err := md.Renderer().Render(&buf, src, doc); err != nil {
		return Manual{}, fmt.Errorf("views: render %s: %w", name, err)
	}
	return Manual{Title: manualTitle(doc, src), HTML: buf.String()}, nil
}

// manualSlug is the id GitHub gives a heading, the one the manual's links
// name when a heading has no anchor: lower case, letters (any script),
// digits, '-' and '_' kept, spaces to hyphens, the rest dropped.
func manualSlug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// slugIDs gives headings manualSlug's ids, with -1, -2, … for repeats.
type slugIDs struct{ seen map[string]bool }

func (s *slugIDs) Generate(value []byte, _ ast.NodeKind) []byte {
	base := manualSlug(string(value))
	if base == "" {
		base = "section"
	}
	id := base
	for i := 1; s.seen[id]; i++ {
		id = fmt.Sprintf("%s-%d", base, i)
	}
	s.seen[id] = true
	return []byte(id)
}

func (s *slugIDs) Put(value []byte) { s.seen[string(value)] = true }

// manualAnchorRE is the manual's explicit anchor, alone on the line before a heading.
var manualAnchorRE = regexp.MustCompile(`^<a id="([^"]+)"></a>$`)

// manualTransformer gives headings their anchors' ids and rewrites links for
// /docs; name is the page's path in the docs folder.
type manualTransformer struct{ name string }

func (m manualTransformer) Transform(doc *ast.Document, reader text.Reader, _ parser.Context) {
	src := reader.Source()
	for n := doc.FirstChild(); n != nil; {
		next := n.NextSibling()
		if h, ok := next.(*ast.Heading); ok {
			if id := anchorID(n, src); id != "" {
				h.SetAttributeString("id", []byte(id))
				doc.RemoveChild(doc, n)
			}
		}
		n = next
	}
	var links []ast.Node
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if entering && (n.Kind() == ast.KindLink || n.Kind() == ast.KindImage) {
			links = append(links, n)
		}
		return ast.WalkContinue, nil
	})
	for _, n := range links {
		switch l := n.(type) {
		case *ast.Link:
			// A link to the page itself (its translation: /docs serves
			// the reader's language) keeps only its text.
			if dest, ok := manualTarget(path.Dir(m.name), string(l.Destination)); ok && dest != manualSelf(m.name) {
				l.Destination = []byte(dest)
			} else {
				unwrap(l)
			}
		case *ast.Image:
			// The manual's images are the repository's screenshots, which
			// the master does not serve: their alt text stands for them.
			if dest, ok := manualTarget(path.Dir(m.name), string(l.Destination)); ok && !strings.HasPrefix(dest, "/docs") {
				l.Destination = []byte(dest)
			} else {
				unwrap(l)
			}
		}
	}
}

// anchorID is the id of a block that is only an explicit anchor, "" for any other.
func anchorID(n ast.Node, src []byte) string {
	if n.Kind() != ast.KindParagraph && n.Kind() != ast.KindHTMLBlock {
		return ""
	}
	lines := n.Lines()
	if lines.Len() != 1 {
		return ""
	}
	seg := lines.At(0)
	if m := manualAnchorRE.FindSubmatch(bytes.TrimSpace(seg.Value(src))); m != nil {
		return string(m[1])
	}
	return ""
}

// unwrap puts a link's or image's children in its place.
func unwrap(n ast.Node) {
	parent := n.Parent()
	for c := n.FirstChild(); c != nil; {
		next := c.NextSibling()
		parent.InsertBefore(parent, n, c)
		c = next
	}
	parent.RemoveChild(parent, n)
}

// manualTarget is where a link of a page in dir leads on /docs: a page of
// the manual is /docs/<name> (the index /docs), a fragment alone or a URL
// with a scheme stays; false for anything else (outside the docs folder, or
// not a page).
func manualTarget(dir, dest string) (string, bool) {
	if strings.HasPrefix(dest, "#") {
		return dest, true
	}
	u, err := url.Parse(dest)
	if err != nil {
		return "", false
	}
	if u.Scheme != "" || u.Host != "" {
		return dest, true
	}
	p := path.Join(dir, u.Path)
	if p == ".." || strings.HasPrefix(p, "../") || !strings.HasSuffix(p, ".md") {
		return "", false
	}
	page := strings.TrimPrefix(strings.TrimSuffix(p, ".md"), "zh-CN/")
	target := "/docs/" + page
	if page == "README" {
		target = "/docs"
	}
	if u.Fragment != "" {
		target += "#" + u.Fragment
	}
	return target, true
}

// manualSelf is the /docs path of the page name.
func manualSelf(name string) string {
	self, _ := manualTarget(".", name)
	return self
}

// manualTitle is the text of the first level-1 heading, "" without one.
func manualTitle(doc ast.Node, src []byte) string {
	for n := doc.FirstChild(); n != nil; n = n.NextSibling() {
		if h, ok := n.(*ast.Heading); ok && h.Level == 1 && h.Lines().Len() > 0 {
			seg := h.Lines().At(h.Lines().Len() - 1)
			return strings.TrimSpace(strings.ReplaceAll(string(seg.Value(src)), "`", ""))
		}
	}
	return ""
}
