package views

import (
	"net/http"
	"strconv"
)

func statusText(code int) string {
	return strconv.Itoa(code) + " " + http.StatusText(code)
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
func orDeleted(title string) string {
	if title == "" {
		return "a deleted task"
	}
	return "“" + title + "”"
}

// poolPath is a pool's page, "/pools/key=value". Label keys and values hold
// only URL-safe characters; a key's prefix keeps its '/', which the route
// reads as part of the pool.
func poolPath(key, value string) string { return "/pools/" + key + "=" + value }
