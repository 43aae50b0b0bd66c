package views

import (
	"strings"
	"testing"
)

// A page of the manual never writes raw HTML: a script, an event handler or
// a javascript: link in the Markdown comes out as nothing or as text.
func TestManualHTMLWritesNoRawHTML(t *testing.T) {
	src := "# Title\n\n<script>alert(1)</script>\n\nText <script>alert(2)</script> and <img src=x onerror=\"alert(3)\">.\n\n" +
		"<div onclick=\"alert(4)\">block</div>\n\n[click](javascript:alert(5)) [data](data:text/html;base64,PHNjcmlwdD4=)\n\n" +
		"| a | b |\n|:---|---:|\n| <script>alert(6)</script> | `<b>` |\n"
	got, err := ManualHTML("tasks.md", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	// No style attribute either: the console's CSP would refuse it.
	for _, bad := range []string{"<script", "onerror", "onclick", "<img", "<div", "javascript:", "data:text/html", "style="} {
		if strings.Contains(got.HTML, bad) {
			t.Errorf("the page holds %q:\n%s", bad, got.HTML)
		}
	}
	if !strings.Contains(got.HTML, "<table>") || !strings.Contains(got.HTML, "<code>&lt;b&gt;</code>") || !strings.Contains(got.HTML, `<th align="right">b</th>`) {
		t.Errorf("the table or its code span is missing:\n%s", got.HTML)
	}
	if got.Title != "Title" {
		t.Errorf("title %q, want Title", got.Title)
	}
}

// Headings get their anchors' ids, else GitHub's slug; links between pages
// lead to /docs, links out of the docs folder keep only their text, links
// with a scheme stay.
func TestManualHTMLLinksAndAnchors(t *testing.T) {
	src := "# The `tasks` page\n\n<a id=\"overlap\"></a>\n## Overlap policy\n\n## Time zones, and DST\n\n### 五分钟上手\n\n" +
		"See [routing](tasks.md#routing), [pools](pools.md), [the index](README.md), [here](#overlap), " +
		"[the front door](../README.md), [source](../master/claims.go), [Go](https://go.dev/doc/) and " +
		"![Nodes page](../static/img/nodes.png).\n"
	got, err := ManualHTML("tasks.md", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<h2 id="overlap">Overlap policy</h2>`, `<h2 id="time-zones-and-dst">`, `<h3 id="五分钟上手">`,
		`<a href="/docs/tasks#routing">routing</a>`, `<a href="/docs/pools">pools</a>`, `<a href="/docs">the index</a>`,
		`<a href="#overlap">here</a>`, "the front door", "source", `<a href="https://go.dev/doc/">Go</a>`, "Nodes page"} {
		if !strings.Contains(got.HTML, want) {
			t.Errorf("the page lacks %s:\n%s", want, got.HTML)
		}
	}
	for _, bad := range []string{"../README.md", "claims.go", "<img", "raw HTML", `id="overlap"></a>`} {
		if strings.Contains(got.HTML, bad) {
			t.Errorf("the page holds %q:\n%s", bad, got.HTML)
		}
	}
	if got.Title != "The tasks page" {
		t.Errorf("title %q, want The tasks page", got.Title)
	}

	zh, err := ManualHTML("zh-CN/tasks.md", []byte("# 任务\n\nEnglish: [../tasks.md](../tasks.md) · [目录](README.md) · [术语表](../glossary.zh-CN.md) · [重叠](../tasks.md#overlap)\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`href="/docs/tasks#overlap"`, `href="/docs"`, `href="/docs/glossary.zh-CN"`, "English: ../tasks.md ·"} {
		if !strings.Contains(zh.HTML, want) {
			t.Errorf("the Chinese page lacks %s:\n%s", want, zh.HTML)
		}
	}
	if strings.Contains(zh.HTML, `href="/docs/tasks"`) {
		t.Errorf("the link to the page's own translation is left (/docs serves the reader's language):\n%s", zh.HTML)
	}
	ref, err := ManualHTML("reference/flags.md", []byte("# Flags\n\n[Configuration](../configuration.md#drain)\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ref.HTML, `href="/docs/configuration#drain"`) {
		t.Errorf("a reference page's link is not rewritten:\n%s", ref.HTML)
	}
}

// Every console page's Help link leads to a page of the manual.
func TestManualTopic(t *testing.T) {
	for active, want := range map[string]string{"tasks": "/docs/tasks", "runs": "/docs/tasks", "connections": "/docs/task-types", "nodes": "/docs/concepts",
		"pools": "/docs/pools", "delayed": "/docs/delayed-tasks", "projects": "/docs/teams", "users": "/docs/teams",
		"tokens": "/docs/teams", "settings": "/docs/configuration", "events": "/docs/operations", "dashboard": "/docs", "": "/docs"} {
		if got := string(ManualTopic(active)); got != want {
			t.Errorf("ManualTopic(%q) = %s, want %s", active, got, want)
		}
	}
}
