// Package docs holds the manual (docs/*.md in English, docs/zh-CN/*.md the same pages in
// Chinese, docs/reference/*.md generated from the code), the Chinese glossary, the tests that
// keep the front doors (README.md, README.zh-CN.md) short, the two languages in step and the
// generated pages current, and FS, the manual as the master serves it.
package docs

import "embed"

// FS holds the manual as the master serves it at /docs: the English pages
// (*.md, the glossary among them), their Chinese translations (zh-CN/*.md)
// and the generated reference pages (reference/*.md, English only).
//
//go:embed *.md zh-CN/*.md reference/*.md
var FS embed.FS
