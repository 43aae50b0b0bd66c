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
