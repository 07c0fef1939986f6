package builder

import (
	"context"
	"fmt"

	"github.com/doppio-db/doppio/client"
	"github.com/doppio-db/doppio/internal/schema"
)

// ServerTarget is the Target of table db.table as c's server has it: its
// key, its schema at version (0: the latest) and the database's
// partition count.
func ServerTarget(ctx context.Context, c *client.Client, db, table string, version int) (*Target, error) {
	d, err := c.GetDatabase(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("database %s: %w", db, err)
	}
	t, err := c.GetTable(ctx, db, table)
	if err != nil {
		return nil, fmt.Errorf("table %s.%s: %w", db, table, err)
	}
	spec := Spec{Schema: t.Schema}
	for _, k := range t.Key {
		spec.Key = append(spec.Key, schema.KeyPart{Name: k.Name, Type: schema.KeyType(k.Type), AutoIncrement: k.AutoIncrement})
	}
	if version == 0 {
		version = t.Version
	} else if version != t.Version {
		v, err := c.GetTableVersion(ctx, db, table, version)
		if err != nil {
			return nil, fmt.Errorf("table %s.%s schema version %d: %w", db, table, version, err)
		}
		spec.Schema = v.Schema
	}
	return NewTarget(db, table, d.Partitions, version, spec)
}
