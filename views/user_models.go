package views

import (
	"context"
	"net/url"
)

// UserRow is one line of the users table.
type UserRow struct {
	Username  string
	Role      string
	Email     string
	Disabled  bool
	CreatedAt string
	Self      bool // the row of the user looking at the page
}

// UserCreateVM is the Create user form: the values typed and the inline errors.
type UserCreateVM struct {
	Username string
	Role     string
	Email    string
	Errors   map[string]string
	Open     bool // keep the form unfolded (after a refused submit)
}

// UsersVM is the users page.
type UsersVM struct {
	Layout      LayoutVM
	Flash       *Flash
	Rows        []UserRow
	Total       int
	From, To    int    // 1-based range shown
	PrevURL     string // "" on the first page
	NextURL     string // "" on the last page
	ShowActions bool   // admins only
	Create      UserCreateVM
}

// UserEditVM is an admin's page for one user: role and email, password reset,
// disable or enable.
type UserEditVM struct {
	Layout      LayoutVM
	Flash       *Flash
	Username    string
	Role        string
	Email       string
	Disabled    bool
	Self        bool
	OnlyAdmin   bool // the only enabled admin: it can be neither demoted nor disabled
	Errors      map[string]string
	FormError   string
	PwErrors    map[string]string
	PwFormError string
}

// AccountVM is one's own account page.
type AccountVM struct {
	Layout      LayoutVM
	Flash       *Flash
	Username    string
	Role        string
	Email       string
	EmailErrors map[string]string
	PwErrors    map[string]string
	// Locale is the language the user chose ("": follow the browser).
	Locale       string
	LocaleErrors map[string]string
}

// userPath is /users/NAME[/action]; usernames are [A-Za-z0-9._-], escaped anyway.
func userPath(name, action string) string {
	p := "/users/" + url.PathEscape(name)
	if action != "" {
		p += "/" + action
	}
	return p
}

// UserPath is userPath for the handlers.
func UserPath(name, action string) string { return userPath(name, action) }

// roleLabel is how a role reads in the console.
func roleLabel(ctx context.Context, role string) string {
	switch role {
	case "admin":
		return T(ctx, "RoleAdminLabel")
	case "viewer":
		return T(ctx, "RoleViewerLabel")
	}
	return ClusterRoleName(ctx, role)
}

func userBoolText(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
