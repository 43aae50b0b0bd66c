package master

import (
	"log/slog"

	"github.com/uptrace/bun"
)

// Accounts is who may act: users and their passwords, the login throttle,
// console sessions and API tokens. Every rule about them (names, the password
// rule, the last admin, a token acting as its owner now) is written here
// once, for the console, the API and the CLI alike.
type Accounts struct {
	db     bun.IDB
	log    *slog.Logger
	events *eventLog
	logins *loginThrottle
	life   *lifecycle
	// directory, when set, checks the passwords of users without a local
	// one (Config.Directory).
	directory PasswordDirectory
	// oidcRoles maps OIDC groups to roles (Config.OIDC); nil: OIDC is off.
	oidcRoles *GroupRoles
	// settings say whether local passwords are for cluster admins only.
	settings *settingsKeeper
}

// Accounts is the engine's accounts service.
func (m *Master) Accounts() *Accounts { return m.accounts }
