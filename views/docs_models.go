package views

// DocsVM is a page of the manual at /docs.
type DocsVM struct {
	Layout LayoutVM
	Page   Manual
	// Lang is the page's language ("en" or "zh-CN"): a Chinese reader gets
	// the English page where it has no translation (the generated reference).
	Lang string
}
