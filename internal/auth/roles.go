package auth

import (
	"fmt"
	"slices"
)

// Role is a built-in role a user can be granted.
type Role string

// The built-in roles. Read, ReadWrite and DBAdmin are granted on one
// database; the others are cluster-wide.
const (
	RoleRead         Role = "read"
	RoleReadWrite    Role = "readWrite"
	RoleDBAdmin      Role = "dbAdmin"
	RoleClusterAdmin Role = "clusterAdmin"
	RoleUserAdmin    Role = "userAdmin"
	RoleRoot         Role = "root"
)

// Roles lists every built-in role.
var Roles = []Role{RoleRead, RoleReadWrite, RoleDBAdmin, RoleClusterAdmin, RoleUserAdmin, RoleRoot}

// PerDatabase reports whether r is granted on one database.
func (r Role) PerDatabase() bool {
	return r == RoleRead || r == RoleReadWrite || r == RoleDBAdmin
}

// Grant is one role held by a user, on DB for a per-database role.
type Grant struct {
	Role Role   `json:"role"`
	DB   string `json:"db,omitempty"`
}

// Validate reports why g cannot be granted, or nil: an unknown role, a
// per-database role without a database, a cluster-wide role with one.
func (g Grant) Validate() error {
	if !slices.Contains(Roles, g.Role) {
		return fmt.Errorf("unknown role %q (one of %v)", g.Role, Roles)
	}
	if g.Role.PerDatabase() && g.DB == "" {
		return fmt.Errorf("role %q is granted on a database: give db", g.Role)
	}
	if !g.Role.PerDatabase() && g.DB != "" {
		return fmt.Errorf("role %q is cluster-wide: give no db", g.Role)
	}
	return nil
}

func (g Grant) String() string {
	if g.DB == "" {
		return string(g.Role)
	}
	return string(g.Role) + " on " + g.DB
}

// Privilege is what a route requires of its caller.
type Privilege int

// The privileges, one per route.
const (
	// Closed, the zero Privilege, is held by no user: a route that names
	// no privilege is closed, never open.
	Closed Privilege = iota
	// Public routes answer anyone, authenticated or not.
	Public
	// Authenticated routes answer any authenticated user.
	Authenticated
	// Read, ReadWrite and DBAdmin are on the route's database.
	Read
	ReadWrite
	DBAdmin
	ClusterAdmin
	UserAdmin
	// NodeOnly routes answer only the cluster's nodes.
	NodeOnly
)

var privilegeNames = [...]string{
	Closed: "closed", Public: "public", Authenticated: "authenticated", Read: "read", ReadWrite: "readWrite",
	DBAdmin: "dbAdmin", ClusterAdmin: "clusterAdmin", UserAdmin: "userAdmin", NodeOnly: "node",
}

// Privileges lists every privilege a route can name (not Closed).
var Privileges = []Privilege{Public, Authenticated, Read, ReadWrite, DBAdmin, ClusterAdmin, UserAdmin, NodeOnly}

// String is the privilege's name in the OpenAPI document's
// x-doppio-privilege.
func (p Privilege) String() string {
	if p < 0 || int(p) >= len(privilegeNames) {
		return fmt.Sprintf("Privilege(%d)", int(p))
	}
	return privilegeNames[p]
}

// ParsePrivilege is the inverse of String, for the privileges a route
// can name.
func ParsePrivilege(s string) (Privilege, bool) {
	for _, p := range Privileges {
		if p.String() == s {
			return p, true
		}
	}
	return Closed, false
}

// PerDatabase reports whether p is checked against the route's database.
func (p Privilege) PerDatabase() bool { return p == Read || p == ReadWrite || p == DBAdmin }

// dbRank orders the per-database roles and privileges: a role includes
// every privilege of rank up to its own.
func dbRank[T Role | Privilege](v T) int {
	switch any(v) {
	case RoleRead, Read:
		return 1
	case RoleReadWrite, ReadWrite:
		return 2
	case RoleDBAdmin, DBAdmin:
		return 3
	}
	return 0
}

// Allows reports whether c, holding grants, may use a route that needs p
// on database db (ignored unless p is per-database). A node may do
// anything: it is the cluster itself. root may do anything but what is
// for nodes only.
func Allows(c Caller, grants []Grant, p Privilege, db string) bool {
	if c.Node || p == Public {
		return true
	}
	if c.User == "" || p == Closed {
		return false
	}
	if p == Authenticated {
		return true
	}
	for _, g := range grants {
		switch {
		case p == NodeOnly:
		case g.Role == RoleRoot:
			return true
		case p.PerDatabase():
			if g.Role.PerDatabase() && g.DB == db && dbRank(g.Role) >= dbRank(p) {
				return true
			}
		case p == ClusterAdmin && g.Role == RoleClusterAdmin,
			p == UserAdmin && g.Role == RoleUserAdmin:
			return true
		}
	}
	return false
}
