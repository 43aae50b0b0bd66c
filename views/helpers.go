package views

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

// statusText is "404 Not Found" in the reader's language.
func statusText(ctx context.Context, code int) string {
	id, ok := statusIDs[code]
	if !ok {
		return strconv.Itoa(code) + " " + http.StatusText(code)
	}
	return strconv.Itoa(code) + " " + T(ctx, id)
}

// statusIDs are the messages of the statuses an error page shows.
var statusIDs = map[int]string{
	http.StatusBadRequest: "Status400", http.StatusUnauthorized: "Status401", http.StatusForbidden: "Status403",
	http.StatusNotFound: "Status404", http.StatusConflict: "Status409", http.StatusRequestEntityTooLarge: "Status413",
	http.StatusUnprocessableEntity: "Status422", http.StatusTooManyRequests: "Status429",
	http.StatusInternalServerError: "Status500", http.StatusBadGateway: "Status502", http.StatusServiceUnavailable: "Status503",
}

// ClusterRoleName names a cluster role (admin, viewer, none).
func ClusterRoleName(ctx context.Context, role string) string {
	switch role {
	case "admin":
		return T(ctx, "RoleAdmin")
	case "viewer":
		return T(ctx, "RoleViewer")
	case "none":
		return T(ctx, "RoleNone")
	}
	return role
}

// ProjectRoleName names a project role (viewer, operator, editor, owner).
func ProjectRoleName(ctx context.Context, role string) string {
	switch role {
	case "viewer":
		return T(ctx, "ProjectRoleViewer")
	case "operator":
		return T(ctx, "ProjectRoleOperator")
	case "editor":
		return T(ctx, "ProjectRoleEditor")
	case "owner":
		return T(ctx, "ProjectRoleOwner")
	}
	return role
}

// loginHere is the login page's own address, where the language switch returns.
func loginHere(next string) string {
	if next == "" {
		return "/login"
	}
	return "/login?next=" + url.QueryEscape(next)
}

func itoa(i int) string { return strconv.Itoa(i) }

func nodePath(name, action string) string {
	if action == "" {
		return "/nodes/" + name
	}
	return "/nodes/" + name + "/" + action
}

func fieldError(errs map[string]string, field string) string {
	if errs == nil {
		return ""
	}
	return errs[field]
}

func itoa64(i int64) string { return strconv.FormatInt(i, 10) }

// runPath is a run's page, or one of its actions. Run ids hold only letters,
// digits, '.', '_', ':' and '-' (the ingest refuses others).
func runPath(id, action string) string {
	if action == "" {
		return "/runs/" + id
	}
	return "/runs/" + id + "/" + action
}

// orDeleted names a task by its title, or says it was deleted.
func orDeleted(ctx context.Context, title string) string {
	if title == "" {
		return T(ctx, "RunDeletedTask")
	}
	return "“" + title + "”"
}

// poolPath is a pool's page, "/pools/key=value". Label keys and values hold
// only URL-safe characters; a key's prefix keeps its '/', which the route
// reads as part of the pool.
func poolPath(key, value string) string { return "/pools/" + key + "=" + value }

// pagerRange is a list's "1–50 of 120"; capped says the total was counted
// only so far ("of more than 10000").
func pagerRange(ctx context.Context, from, to, total int, capped bool) string {
	if capped {
		return T(ctx, "PagerRangeCapped", "From", from, "To", to, "Total", total)
	}
	return T(ctx, "PagerRange", "From", from, "To", to, "Total", total)
}

// chartHeadingID is the message naming the dashboard chart of a range.
func chartHeadingID(r string) string {
	switch r {
	case "1h":
		return "DashChartHeading1h"
	case "24h":
		return "DashChartHeading24h"
	}
	return "DashChartHeading14d"
}

// chartRangeID is the message of a range's button.
func chartRangeID(r string) string {
	switch r {
	case "1h":
		return "DashRange1h"
	case "24h":
		return "DashRange24h"
	}
	return "DashRange14d"
}
