package views

import "github.com/a-h/templ"

// DocsVM is a page of the manual at /docs.
type DocsVM struct {
	Layout LayoutVM
	Page   Manual
	// Lang is the page's language ("en" or "zh-CN"): a Chinese reader gets
	// the English page where it has no translation (the generated reference).
	Lang string
}

// ManualTopic is the page of the manual about a part of the console, by the
// layout's nav entry (LayoutVM.Active): the target of the header's Help link.
func ManualTopic(active string) templ.SafeURL {
	switch active {
	case "tasks", "runs":
		return "/docs/tasks"
	case "connections":
		return "/docs/task-types"
	case "nodes":
		return "/docs/concepts"
	case "pools":
		return "/docs/pools"
	case "delayed":
		return "/docs/delayed-tasks"
	case "projects", "users", "tokens", "account":
		return "/docs/teams"
	case "settings":
		return "/docs/configuration"
	case "events":
		return "/docs/operations"
	}
	return "/docs"
}
