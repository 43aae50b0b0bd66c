// Package docs holds documentation that is not Go: the Chinese glossary, and the tests that keep
// README.zh-CN.md in step with README.md.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// mirroredSections are the README.md "## " sections that README.zh-CN.md translates. Each has an
// anchor `<!-- section: NAME -->` in README.zh-CN.md right before its Chinese heading, so a renamed
// or removed English section fails here and the translation is looked at again.
var mirroredSections = []string{
	"Set up",
	"Five minutes with the console",
	"How nodes work",
	"Tasks",
	"Pools",
	"Running several masters",
	"Teams and sign-on",
	"Security model",
}

// glossaryTerms must each have a row in docs/glossary.zh-CN.md (first column, in backquotes or not).
var glossaryTerms = []string{
	"node", "worker", "master", "leader", "lease", "task", "delayed task", "executor",
	"keeper (task keeper)", "owner (project role)", "schedule", "fire", "claim", "run (noun)",
	"routing", "misfire / misfire policy", "overlap / overlap policy", "shard", "broadcast",
	"failover", "pool", "label", "selector", "project", "member", "role", "cluster admin",
	"viewer", "operator", "editor", "owner", "token / API token", "event / event log",
	"retry / retries", "timeout", "drain", "Connect", "Enable / Disable", "Start / Stop",
	"Pause / Resume", "Kill", "Cancel", "approval / Approve", "break glass",
}

// bannedInChinese are renderings the glossary rejects; they must not appear in README.zh-CN.md.
var bannedInChinese = []string{"失火", "主控", "资源池", "禁用", "杀死"}

func readRepoFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", name))
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return strings.ReplaceAll(string(b), "\r\n", "\n")
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

// section returns the text of the "## " section named heading, without the heading line, up to
// the next "## " heading.
func section(t *testing.T, text, heading string) string {
	t.Helper()
	start := strings.Index(text, "\n## "+heading+"\n")
	if start < 0 {
		t.Fatalf("README.md has no section %q", "## "+heading)
	}
	body := text[start+len("\n## "+heading+"\n"):]
	if end := strings.Index(body, "\n## "); end >= 0 {
		body = body[:end]
	}
	return body
}

var anchorRE = regexp.MustCompile(`(?m)^<!-- section: (.+?) -->\n(.*)$`)

func TestChineseReadmeHasEveryMirroredSection(t *testing.T) {
	en := readRepoFile(t, "README.md")
	zh := readRepoFile(t, "README.zh-CN.md")

	anchors := map[string]string{} // English section -> the line after its anchor
	for _, m := range anchorRE.FindAllStringSubmatch(zh, -1) {
		if _, dup := anchors[m[1]]; dup {
			t.Errorf("README.zh-CN.md: anchor %q appears twice", m[1])
		}
		anchors[m[1]] = m[2]
	}
	for _, name := range mirroredSections {
		if !strings.Contains(en, "\n## "+name+"\n") {
			t.Errorf("README.md has no section %q: update mirroredSections and README.zh-CN.md", "## "+name)
		}
		next, ok := anchors[name]
		if !ok {
			t.Errorf("README.zh-CN.md has no anchor <!-- section: %s --> for README.md's %q", name, "## "+name)
			continue
		}
		if !strings.HasPrefix(next, "## ") {
			t.Errorf("README.zh-CN.md: anchor %q is followed by %q, want a \"## \" heading", name, next)
		}
	}
	for name := range anchors {
		if !strings.Contains(en, "\n## "+name+"\n") {
			t.Errorf("README.zh-CN.md anchors %q, which README.md no longer has", name)
		}
	}
}

func TestChineseReadmeSetUpCommandsAreTheEnglishOnes(t *testing.T) {
	en := readRepoFile(t, "README.md")
	zh := readRepoFile(t, "README.zh-CN.md")

	enBlocks := fencedBlocks(section(t, en, "Set up"))
	if len(enBlocks) == 0 {
		t.Fatal("README.md's Set up has no code block")
	}
	zhStart := strings.Index(zh, "<!-- section: Set up -->")
	if zhStart < 0 {
		t.Fatal("README.zh-CN.md has no Set up anchor")
	}
	zhBlocks := fencedBlocks(zh[zhStart:])
	if len(zhBlocks) == 0 || zhBlocks[0] != enBlocks[0] {
		got := "(none)"
		if len(zhBlocks) > 0 {
			got = zhBlocks[0]
		}
		t.Errorf("README.zh-CN.md's set-up commands differ from README.md's:\nREADME.md:\n%s\nREADME.zh-CN.md:\n%s", enBlocks[0], got)
	}
}

func TestChineseReadmeCodeBlocksExistInEnglishReadme(t *testing.T) {
	en := readRepoFile(t, "README.md")
	zh := readRepoFile(t, "README.zh-CN.md")
	blocks := fencedBlocks(zh)
	if len(blocks) < 5 {
		t.Fatalf("README.zh-CN.md has %d code blocks, expected the commands of its sections", len(blocks))
	}
	for _, b := range blocks {
		if !strings.Contains(en, b) {
			t.Errorf("README.zh-CN.md has a code block README.md no longer has (copy it again from README.md):\n%s", b)
		}
	}
}

func TestReadmeLinksTheChineseReadme(t *testing.T) {
	en := readRepoFile(t, "README.md")
	head := en
	if i := strings.Index(en, "\n## "); i >= 0 {
		head = en[:i]
	}
	if !strings.Contains(head, "(README.zh-CN.md)") {
		t.Error("README.md does not link README.zh-CN.md before its first section")
	}
	zh := readRepoFile(t, "README.zh-CN.md")
	if !strings.Contains(zh, "(docs/glossary.zh-CN.md)") {
		t.Error("README.zh-CN.md does not link the glossary")
	}
	for _, w := range bannedInChinese {
		if strings.Contains(zh, w) {
			t.Errorf("README.zh-CN.md uses %q, a rendering docs/glossary.zh-CN.md rejects", w)
		}
	}
}

func TestGlossaryHasEveryCoreTerm(t *testing.T) {
	g := readRepoFile(t, filepath.Join("docs", "glossary.zh-CN.md"))
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
