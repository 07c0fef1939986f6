package bulkload

import (
	"context"

	"github.com/doppio-db/doppio/internal/bulk"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/schema"
)

// Catalog is what a load needs of the schemas (*catalog.Catalog).
type Catalog interface {
	Database(name string) (schema.Database, bool)
	Table(db, table string) (*schema.Table, bool)
	// RaiseCacheGeneration orphans the table's entries in the cache tier:
	// a load changes documents without a change-log entry per document.
	RaiseCacheGeneration(ctx context.Context, db string, tables ...string) error
}

// Modes a load may ask for.
const (
	ModeMerge   = "merge"
	ModeReplace = "replace"
)

// checkMode returns the mode a load asks for ("" is merge), refusing
// what is no mode and a replace into a derived table's version (which a
// push fills whole anyway).
func checkMode(mode, into string) (string, error) {
	switch mode {
	case "", ModeMerge:
		return ModeMerge, nil
	case ModeReplace:
		if into != "" {
			return "", problem.Field(problem.Invalid, "mode", "a derived table's version is loaded whole: mode %q is for a table's load", mode)
		}
		return ModeReplace, nil
	}
	return "", problem.Field(problem.Malformed, "mode", "mode %q is not a load mode (%q or %q)", mode, ModeMerge, ModeReplace)
}

// checkBuild refuses a build that does not fit the table it names: each
// mismatch is a problem naming the manifest's field, found before anything
// is recorded or applied.
func checkBuild(m *bulk.Manifest, cat Catalog, into string) error {
	db, ok := cat.Database(m.Database)
	if !ok {
		return problem.Field(problem.NotFound, "database", "the build is for database %s, which does not exist", m.Database)
	}
	t, ok := cat.Table(m.Database, m.Table)
	if !ok {
		return problem.Field(problem.NotFound, "table", "the build is for table %s.%s, which does not exist", m.Database, m.Table)
	}
	if t.Derived() && into == "" {
		return problem.Field(problem.Conflict, "table",
			"table %s.%s is derived: push the build as a new version (POST /_derived/%s/%s/versions) instead of loading it", m.Database, m.Table, m.Database, m.Table)
	}
	if m.Partitions != db.Partitions {
		return problem.Field(problem.Conflict, "partitions",
			"the build has %d partitions, database %s has %d: build it again for this database", m.Partitions, db.Name, db.Partitions)
	}
	if m.Partitioner != db.Partitioner {
		return problem.Field(problem.Conflict, "partitioner",
			"the build was partitioned by %q, database %s by %q", m.Partitioner, db.Name, db.Partitioner)
	}
	if m.SchemaVersion > t.Latest() {
		return problem.Field(problem.Conflict, "schemaVersion",
			"the build is encoded with schema version %d of %s.%s, whose registered versions are 1 to %d", m.SchemaVersion, m.Database, m.Table, t.Latest())
	}
	return nil
}
