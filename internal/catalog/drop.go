package catalog

import (
	"context"
	"encoding/json"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/schema"
)

// A drop is begun in the catalog and finished in the partitions. Begin
// removes the definition and leaves a marker in the same etcd
// transaction: from then on no node accepts a write of the table, and
// the name cannot be created again until the caller, having dropped the
// data of every partition, ends the drop. A drop interrupted in between
// (a node or the caller died) is finished by asking for it again.
//
// Layout under the prefix, beside the definitions:
//
//	{prefix}/drop/table/{db}/{table}  {} while the table's drop is under way
//	{prefix}/drop/db/{db}             JSON DatabaseDrop
//
// A database's marker stays once its drop is done: the database's
// partitions (their Raft groups and placements) live on, so a database
// created again under the name keeps its partition count and partitioner.

// DatabaseDrop is the record of a database's drop.
type DatabaseDrop struct {
	Database schema.Database `json:"database"`
	// Tables are the tables the database had.
	Tables []string `json:"tables"`
	// Done: every partition dropped its data.
	Done bool `json:"done"`
}

func (c *Catalog) tableDropKey(db, table string) string {
	return c.prefix + "/drop/table/" + db + "/" + table
}

func (c *Catalog) dbDropKey(db string) string { return c.prefix + "/drop/db/" + db }

// BeginTableDrop removes the table's definition and marks its drop as
// under way; asked again for a table whose drop is under way, it only
// reports so. The table must exist, or be being dropped (NotFound).
func (c *Catalog) BeginTableDrop(ctx context.Context, db, table string) error {
	tableKey, marker := c.tableKey(db, table), c.tableDropKey(db, table)
	for range maxAttempts {
		resp, err := c.cli.Txn(ctx).Then(clientv3.OpGet(tableKey), clientv3.OpGet(marker)).Commit()
		if err != nil {
			return storeError(ctx, err)
		}
		tkvs := resp.Responses[0].GetResponseRange().Kvs
		if len(tkvs) == 0 {
			if len(resp.Responses[1].GetResponseRange().Kvs) > 0 {
				return nil // under way: the caller finishes it
			}
			return problem.New(problem.NotFound, "table %q does not exist in database %q", table, db)
		}
		tr, err := c.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(tableKey), "=", tkvs[0].ModRevision)).
			Then(clientv3.OpDelete(tableKey), clientv3.OpPut(marker, "{}")).Commit()
		if err != nil {
			return storeError(ctx, err)
		}
		if tr.Succeeded {
			c.applyDeleted(tableKey, tr.Header.Revision)
			return nil
		}
		// A new version was registered in between: drop that one.
	}
	return contended()
}

// EndTableDrop records that every partition dropped the table's data:
// the name may be created again.
func (c *Catalog) EndTableDrop(ctx context.Context, db, table string) error {
	if _, err := c.cli.Delete(ctx, c.tableDropKey(db, table)); err != nil {
		return storeError(ctx, err)
	}
	return nil
}

// BeginDatabaseDrop removes the database's definition and its tables' and
// marks its drop as under way, returning the drop's record; asked again
// while the drop is under way, it returns the record. The database must
// exist, or be being dropped (NotFound).
func (c *Catalog) BeginDatabaseDrop(ctx context.Context, db string) (DatabaseDrop, error) {
	dbKey, tables, marker := c.dbKey(db), c.prefix+"/table/"+db+"/", c.dbDropKey(db)
	for range maxAttempts {
		resp, err := c.cli.Txn(ctx).Then(clientv3.OpGet(dbKey), clientv3.OpGet(tables, clientv3.WithPrefix()), clientv3.OpGet(marker)).Commit()
		if err != nil {
			return DatabaseDrop{}, storeError(ctx, err)
		}
		dkvs := resp.Responses[0].GetResponseRange().Kvs
		if len(dkvs) == 0 {
			if mkvs := resp.Responses[2].GetResponseRange().Kvs; len(mkvs) > 0 {
				var rec DatabaseDrop
				if err := json.Unmarshal(mkvs[0].Value, &rec); err != nil {
					return DatabaseDrop{}, fmt.Errorf("catalog: stored drop of %q: %w", db, err)
				}
				if !rec.Done {
					return rec, nil
				}
			}
			return DatabaseDrop{}, problem.New(problem.NotFound, "database %q does not exist", db)
		}
		rec := DatabaseDrop{Tables: []string{}}
		if err := json.Unmarshal(dkvs[0].Value, &rec.Database); err != nil {
			return DatabaseDrop{}, fmt.Errorf("catalog: stored database %q: %w", db, err)
		}
		for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
			rec.Tables = append(rec.Tables, string(kv.Key[len(tables):]))
		}
		val, err := json.Marshal(rec)
		if err != nil {
			return DatabaseDrop{}, err
		}
		rev := resp.Header.Revision
		tr, err := c.cli.Txn(ctx).If(
			clientv3.Compare(clientv3.ModRevision(dbKey), "=", dkvs[0].ModRevision),
			// No table created or changed since the read.
			clientv3.Compare(clientv3.ModRevision(tables), "<", rev+1).WithPrefix(),
		).Then(
			clientv3.OpDelete(dbKey), clientv3.OpDelete(tables, clientv3.WithPrefix()), clientv3.OpPut(marker, string(val)),
		).Commit()
		if err != nil {
			return DatabaseDrop{}, storeError(ctx, err)
		}
		if tr.Succeeded {
			c.applyDeleted(dbKey, tr.Header.Revision)
			for _, t := range rec.Tables {
				c.applyDeleted(c.tableKey(db, t), tr.Header.Revision)
			}
			return rec, nil
		}
	}
	return DatabaseDrop{}, contended()
}

// EndDatabaseDrop records that every partition dropped the database's
// data: the name may be created again, with the same partitions.
func (c *Catalog) EndDatabaseDrop(ctx context.Context, rec DatabaseDrop) error {
	rec.Done = true
	val, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if _, err := c.cli.Put(ctx, c.dbDropKey(rec.Database.Name), string(val)); err != nil {
		return storeError(ctx, err)
	}
	return nil
}

// applyDeleted removes key from the cache as of rev.
func (c *Catalog) applyDeleted(key string, rev int64) {
	c.mu.Lock()
	changed, _ := c.applyLocked(key, nil, rev, true)
	c.mu.Unlock()
	if changed {
		c.changed.Notify()
	}
}

// dropUnderWay is the Conflict a schema write meets while the name's
// drop is under way.
func dropUnderWay(what, path string) error {
	return problem.New(problem.Conflict, "the drop of %s is under way: send DELETE %s again to finish it, then create it", what, path)
}
