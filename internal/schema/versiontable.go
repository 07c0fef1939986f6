package schema

import (
	"strconv"
	"strings"
)

// versionMark separates a derived table's name from a version number in
// the name its version is stored under; no valid table name holds it.
const versionMark = "@"

// VersionTable is the name version v of derived table name is stored
// under: a name no user table can have.
func VersionTable(name string, v int) string { return name + versionMark + strconv.Itoa(v) }

// IsVersionTable reports whether a stored table name is a derived
// table's version rather than a user's table.
func IsVersionTable(name string) bool { return strings.Contains(name, versionMark) }

// Derived reports whether t is a derived table.
func (t *Table) Derived() bool { return t.Def.Kind == KindDerived }

// StoredAs returns t as stored under another name, sharing its compiled
// versions: the table a derived table's version is read and written as.
func (t *Table) StoredAs(name string) *Table {
	def := t.Def
	def.Name = name
	return &Table{Def: def, versions: t.versions}
}
