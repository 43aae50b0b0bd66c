package views

import (
	"net/url"

	"github.com/a-h/templ"
)

// oidcHref is where the "Sign in with" button goes, keeping the page asked for.
func oidcHref(next string) templ.SafeURL {
	return templ.SafeURL("/login/oidc?next=" + url.QueryEscape(next))
}
