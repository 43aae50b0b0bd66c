package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"unicode"
)

// maxReadmeLines bounds README.md: it is the front door, the manual is in docs/.
const maxReadmeLines = 300

// setUpCommands is README.md's first code block under "## Set up", exactly.
const setUpCommands = "```sh\ngo run ./cmd/schedulemaster master\ngo test ./...\n```"

// glossaryTerms must each have a row in docs/glossary.zh-CN.md (first column, in backquotes or not).
var glossaryTerms = []string{
	"node", "worker", "master", "leader", "lease", "task", "delayed task", "executor",
	"keeper (task keeper)", "owner (project role)", "schedule", "fire", "claim", "run (noun)",
	"routing", "misfire / misfire policy", "overlap / overlap policy", "shard", "broadcast",
	"failover", "pool", "label", "selector", "project", "member", "role", "cluster admin",
	"viewer", "operator", "editor", "owner", "token / API token", "event / event log",
	"retry / retries", "timeout", "drain", "Connect", "Enable / Disable", "Start / Stop",
	"Pause / Resume", "Kill", "Cancel", "approval / Approve", "break glass", "workflow", "step", "backfill",
}

// bannedInChinese are renderings the glossary rejects; no Chinese page may use them.
var bannedInChinese = []string{"失火", "主控", "资源池", "禁用", "杀死", "工人", "从节点"}

// externalIssueMarkers let a line name an issue number: it then refers to another project's
// tracker, not ours. Our own issue numbers mean nothing to a reader and stay out of the docs.
var externalIssueMarkers = []string{"github.com/", "golang/go", "XXL-JOB", "Dkron", "dkron"}

// repoFile reads a file by its path from the repository's root.
func repoFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(name)))
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return strings.ReplaceAll(string(b), "\r\n", "\n")
}

// mdFiles lists the Markdown files of a folder of the repository (slash paths from the root).
func mdFiles(t *testing.T, dir string) []string {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join("..", filepath.FromSlash(dir), "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range matches {
		rel, err := filepath.Rel("..", m)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, filepath.ToSlash(rel))
	}
	sort.Strings(names)
	return names
}

// manualPages are the English pages of the manual (docs/*.md but the glossary), by file name.
func manualPages(t *testing.T) []string {
	t.Helper()
	var pages []string
	for _, f := range mdFiles(t, "docs") {
		if name := filepath.Base(f); name != "glossary.zh-CN.md" {
			pages = append(pages, name)
		}
	}
	if len(pages) < 10 {
		t.Fatalf("docs/ has %d pages; the manual is missing", len(pages))
	}
	return pages
}

// pagePair is an English page and its Chinese translation.
type pagePair struct{ en, zh string }

func pagePairs(t *testing.T) []pagePair {
	t.Helper()
	pairs := []pagePair{{"README.md", "README.zh-CN.md"}}
	for _, name := range manualPages(t) {
		pairs = append(pairs, pagePair{"docs/" + name, "docs/zh-CN/" + name})
	}
	return pairs
}

// documents are every file whose links and wording are checked. The generated reference
// pages (docs/reference/) are among them, but have no Chinese pages: they are made from the
// code, in English, and the Chinese pages link them.
func documents(t *testing.T) []string {
	t.Helper()
	docs := []string{"README.md", "README.zh-CN.md"}
	docs = append(docs, mdFiles(t, "docs")...)
	docs = append(docs, mdFiles(t, "docs/reference")...)
	return append(docs, mdFiles(t, "docs/zh-CN")...)
}

// chineseDocuments are the Chinese pages: the front door and docs/zh-CN/.
func chineseDocuments(t *testing.T) []string {
	t.Helper()
	return append([]string{"README.zh-CN.md"}, mdFiles(t, "docs/zh-CN")...)
}

// fencedBlocks returns every fenced code block of a Markdown text, fences and indentation
// included, in order.
func fencedBlocks(text string) []string {
	var blocks []string
	var cur []string
	in := false
	for _, line := range strings.Split(text, "\n") {
		fence := strings.HasPrefix(strings.TrimLeft(line, " "), "```")
		switch {
		case fence && !in:
			in = true
			cur = []string{line}
		case fence && in:
			in = false
			blocks = append(blocks, strings.Join(append(cur, line), "\n"))
		case in:
			cur = append(cur, line)
		}
	}
	return blocks
}

// prose is a Markdown text without its fenced code blocks (their lines left empty, so line
// numbers hold).
func prose(text string) []string {
	lines := strings.Split(text, "\n")
	in := false
	for i, line := range lines {
		fence := strings.HasPrefix(strings.TrimLeft(line, " "), "```")
		if fence || in {
			lines[i] = ""
		}
		if fence {
			in = !in
		}
	}
	return lines
}

var (
	anchorLineRE = regexp.MustCompile(`^<a id="([^"]+)"></a>$`)
	anchorRE     = regexp.MustCompile(`<a id="([^"]+)"></a>`)
	headingRE    = regexp.MustCompile(`^(#{1,6}) (.+)$`)
)

// anchor is an explicit anchor and the level of the heading it stands before.
type anchor struct {
	id    string
	level int
}

func (a anchor) String() string { return fmt.Sprintf("%s (h%d)", a.id, a.level) }

// anchors returns the explicit anchors of a page in order, and complains about every "## " or
// "### " heading that has none on the line before it.
func anchors(t *testing.T, name, text string) []anchor {
	t.Helper()
	lines := prose(text)
	var out []anchor
	for i, line := range lines {
		h := headingRE.FindStringSubmatch(line)
		if h == nil || (len(h[1]) != 2 && len(h[1]) != 3) {
			if m := anchorLineRE.FindStringSubmatch(line); m != nil &&
				(i+1 >= len(lines) || !headingRE.MatchString(lines[i+1])) {
				t.Errorf("%s:%d: anchor %q is not on the line before a heading", name, i+1, m[1])
			}
			continue
		}
		var m []string
		if i > 0 {
			m = anchorLineRE.FindStringSubmatch(lines[i-1])
		}
		if m == nil {
			t.Errorf("%s:%d: heading %q has no <a id=\"…\"></a> on the line before it", name, i+1, line)
			continue
		}
		out = append(out, anchor{m[1], len(h[1])})
	}
	return out
}

// slug is the id GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens.
func slug(heading string) string {
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

// targets are the ids a link's #fragment may name in a page: its explicit anchors and the
// slugs of its headings.
func targets(text string) map[string]bool {
	ids := map[string]bool{}
	for _, line := range prose(text) {
		for _, m := range anchorRE.FindAllStringSubmatch(line, -1) {
			ids[m[1]] = true
		}
		if h := headingRE.FindStringSubmatch(line); h != nil {
			ids[slug(strings.ReplaceAll(h[2], "`", ""))] = true
		}
	}
	return ids
}

var (
	codeSpanRE = regexp.MustCompile("`[^`\n]*`")
	mdLinkRE   = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	htmlSrcRE  = regexp.MustCompile(`<(?:img|a)\s[^>]*?(?:src|href)="([^"]+)"`)
)

// links returns the link targets of a page with their line numbers, leaving out code.
func links(text string) (out []struct {
	line   int
	target string
}) {
	for i, line := range prose(text) {
		line = codeSpanRE.ReplaceAllString(line, "")
		for _, re := range []*regexp.Regexp{mdLinkRE, htmlSrcRE} {
			for _, m := range re.FindAllStringSubmatch(line, -1) {
				out = append(out, struct {
					line   int
					target string
				}{i + 1, m[1]})
			}
		}
	}
	return out
}

func TestReadmeIsAFrontDoor(t *testing.T) {
	en := repoFile(t, "README.md")
	if n := strings.Count(strings.TrimSuffix(en, "\n"), "\n") + 1; n > maxReadmeLines {
		t.Errorf("README.md has %d lines, at most %d: move the detail to a page of docs/", n, maxReadmeLines)
	}
	head := en
	if i := strings.Index(en, "\n## "); i >= 0 {
		head = en[:i]
	}
	if !strings.Contains(head, "(README.zh-CN.md)") {
		t.Error("README.md does not link README.zh-CN.md before its first section")
	}
	start := strings.Index(en, "\n## Set up\n")
	if start < 0 {
		t.Fatal(`README.md has no section "## Set up"`)
	}
	body := en[start+len("\n## Set up\n"):]
	if end := strings.Index(body, "\n## "); end >= 0 {
		body = body[:end]
	}
	blocks := fencedBlocks(body)
	if len(blocks) == 0 || blocks[0] != setUpCommands {
		got := "(none)"
		if len(blocks) > 0 {
			got = blocks[0]
		}
		t.Errorf("README.md's first code block under Set up is\n%s\nwant exactly\n%s", got, setUpCommands)
	}
	for _, page := range manualPages(t) {
		if !strings.Contains(en, "(docs/"+page) {
			t.Errorf("README.md does not link docs/%s", page)
		}
	}
}

func TestManualIndexesLinkEveryPage(t *testing.T) {
	for _, dir := range []string{"docs", "docs/zh-CN"} {
		index := repoFile(t, dir+"/README.md")
		for _, page := range manualPages(t) {
			if page != "README.md" && !strings.Contains(index, "]("+page+")") {
				t.Errorf("%s/README.md does not link %s", dir, page)
			}
		}
		up := map[string]string{"docs": "", "docs/zh-CN": "../"}[dir]
		for _, f := range mdFiles(t, "docs/reference") {
			if page := up + "reference/" + filepath.Base(f); !strings.Contains(index, "]("+page+")") {
				t.Errorf("%s/README.md does not link the generated %s", dir, page)
			}
		}
	}
}

func TestEveryPageHasAChinesePage(t *testing.T) {
	en := manualPages(t)
	var zh []string
	for _, f := range mdFiles(t, "docs/zh-CN") {
		zh = append(zh, filepath.Base(f))
	}
	for _, name := range en {
		if !slices.Contains(zh, name) {
			t.Errorf("docs/%s has no Chinese page docs/zh-CN/%s", name, name)
		}
	}
	for _, name := range zh {
		if !slices.Contains(en, name) {
			t.Errorf("docs/zh-CN/%s translates no English page docs/%s", name, name)
		}
	}
}

func TestPagePairsShareAnchorsAndCodeBlocks(t *testing.T) {
	for _, p := range pagePairs(t) {
		if _, err := os.Stat(filepath.Join("..", filepath.FromSlash(p.zh))); err != nil {
			continue // reported by TestEveryPageHasAChinesePage
		}
		en, zh := repoFile(t, p.en), repoFile(t, p.zh)

		enA, zhA := anchors(t, p.en, en), anchors(t, p.zh, zh)
		seen := map[string]bool{}
		for _, a := range enA {
			if seen[a.id] {
				t.Errorf("%s: anchor %q appears twice", p.en, a.id)
			}
			seen[a.id] = true
		}
		if !slices.Equal(enA, zhA) {
			t.Errorf("%s and %s differ in their headings' anchors (same ids, same levels, same order):\n%v\n%v",
				p.en, p.zh, enA, zhA)
		}

		enB, zhB := fencedBlocks(en), fencedBlocks(zh)
		if len(enB) != len(zhB) {
			t.Errorf("%s has %d code blocks, %s %d: copy them byte for byte", p.en, len(enB), p.zh, len(zhB))
		}
		for i := 0; i < len(enB) && i < len(zhB); i++ {
			if enB[i] != zhB[i] {
				t.Errorf("code block %d differs between %s and %s (copy it byte for byte):\n%s\n---\n%s",
					i+1, p.en, p.zh, enB[i], zhB[i])
			}
		}
	}
}

func TestRelativeLinksResolve(t *testing.T) {
	pages := map[string]map[string]bool{} // Markdown file -> the ids its fragments may name
	idsOf := func(path string) map[string]bool {
		if ids, ok := pages[path]; ok {
			return ids
		}
		b, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(path)))
		if err != nil {
			return nil
		}
		pages[path] = targets(string(b))
		return pages[path]
	}
	for _, doc := range documents(t) {
		text := repoFile(t, doc)
		for _, l := range links(text) {
			target := l.target
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, fragment, _ := strings.Cut(target, "#")
			resolved := doc
			if path != "" {
				resolved = filepath.ToSlash(filepath.Join(filepath.Dir(doc), filepath.FromSlash(path)))
				if strings.HasPrefix(resolved, "../") {
					t.Errorf("%s:%d: link %q leaves the repository", doc, l.line, target)
					continue
				}
				if _, err := os.Stat(filepath.Join("..", filepath.FromSlash(resolved))); err != nil {
					t.Errorf("%s:%d: link %q: no file %s", doc, l.line, target, resolved)
					continue
				}
			}
			if fragment == "" || !strings.HasSuffix(resolved, ".md") {
				continue
			}
			if !idsOf(resolved)[fragment] {
				t.Errorf("%s:%d: link %q: %s has no anchor or heading %q", doc, l.line, target, resolved, fragment)
			}
		}
	}
}

var issueRE = regexp.MustCompile(`[Ii]ssues? #?[0-9]+|(^|[\s(（])#[0-9]+\b|(问题|议题|工单) ?#?[0-9]+`)

func TestNoInternalIssueNumbers(t *testing.T) {
	for _, doc := range documents(t) {
		for i, line := range strings.Split(repoFile(t, doc), "\n") {
			if !issueRE.MatchString(line) {
				continue
			}
			external := false
			for _, m := range externalIssueMarkers {
				external = external || strings.Contains(line, m)
			}
			if !external {
				t.Errorf("%s:%d: %q names an issue of ours: say what changed instead", doc, i+1, issueRE.FindString(line))
			}
		}
	}
}

func TestChinesePagesFollowTheGlossary(t *testing.T) {
	for _, doc := range chineseDocuments(t) {
		zh := repoFile(t, doc)
		if !strings.Contains(zh, "glossary.zh-CN.md)") {
			t.Errorf("%s does not link the glossary docs/glossary.zh-CN.md", doc)
		}
		for i, line := range strings.Split(zh, "\n") {
			for _, w := range bannedInChinese {
				if strings.Contains(line, w) {
					t.Errorf("%s:%d uses %q, a rendering docs/glossary.zh-CN.md rejects", doc, i+1, w)
				}
			}
		}
	}
}

func TestGlossaryHasEveryCoreTerm(t *testing.T) {
	g := repoFile(t, "docs/glossary.zh-CN.md")
	if !strings.Contains(g, "| English | 中文 | 说明 |") {
		t.Fatal("docs/glossary.zh-CN.md has no table headed | English | 中文 | 说明 |")
	}
	rows := map[string]string{} // first cell -> second cell
	for _, line := range strings.Split(g, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.HasPrefix(line, "|") {
			continue
		}
		en, zh := strings.TrimSpace(cells[1]), strings.TrimSpace(cells[2])
		if en == "English" || strings.HasPrefix(en, "---") {
			continue
		}
		if zh == "" {
			t.Errorf("glossary: %q has no Chinese term", en)
		}
		if _, dup := rows[en]; dup {
			t.Errorf("glossary: %q has two rows", en)
		}
		rows[en] = zh
	}
	for _, term := range glossaryTerms {
		if _, ok := rows[term]; !ok {
			t.Errorf("glossary: no row for %q", term)
		}
	}
}

// TestSlug pins the heading ids the link check accepts besides explicit anchors.
func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"Set up":                            "set-up",
		"Per database: SQLite, MariaDB":     "per-database-sqlite-mariadb",
		"A master's database hangs":         "a-masters-database-hangs",
		"Sign-on: LDAP":                     "sign-on-ldap",
		"五分钟上手控制台":                          "五分钟上手控制台",
		"Container image, compose and Helm": "container-image-compose-and-helm",
	} {
		if got := slug(in); got != want {
			t.Errorf("slug(%q) = %q, want %q", in, got, want)
		}
	}
}
