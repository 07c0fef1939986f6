package backupdir

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"

	"github.com/doppio-db/doppio/client"
)

// RestoreOptions say what to restore where.
type RestoreOptions struct {
	// Backup is the id to restore (default: the newest backup in the
	// directory).
	Backup string
	// As names the database to restore into (default: the backup's).
	As string
	// Replicas of a database the restore creates (default: the backup's).
	Replicas int
}

// Restore loads a backup of dir, with its incremental chain, into a new or
// empty database: it checks every file of the chain and every partition of
// an existing database before it changes anything, creates the database
// and its tables (every schema version) if missing, then restores each
// partition through its leader (begin, every table of the chain in order,
// finish). A restore that is interrupted and run again converges: the
// partitions it finished are left as they are, the others start over.
func Restore(ctx context.Context, o Options, dir string, ro RestoreOptions) (*Manifest, error) {
	o.defaults()
	id := ro.Backup
	if id == "" {
		all, err := List(dir)
		if err != nil {
			return nil, err
		}
		if len(all) == 0 {
			return nil, fmt.Errorf("no backup in %s", dir)
		}
		id = all[len(all)-1].ID
	}
	chain, err := Chain(dir, id)
	if err != nil {
		return nil, err
	}
	last := chain[len(chain)-1]
	db := ro.As
	if db == "" {
		db = last.Database
	}
	c := client.New(o.Server, client.WithHTTPClient(o.HTTP), client.WithRetry(o.Retry))
	d, err := c.GetDatabase(ctx, db)
	var ce *client.Error
	exists := err == nil
	done := make([]bool, last.Partitions)
	switch {
	case exists:
		if d.Partitions != last.Partitions {
			return nil, fmt.Errorf("database %s has %d partitions, the backup %d: a backup is restored only into the same partition count", db, d.Partitions, last.Partitions)
		}
		if err := checkTables(ctx, c, db, d, last.Tables); err != nil {
			return nil, err
		}
		if done, err = o.checkEmpty(ctx, db, last); err != nil {
			return nil, err
		}
	case errors.As(err, &ce) && ce.Status == http.StatusNotFound:
		replicas := ro.Replicas
		if replicas <= 0 {
			replicas = last.Replicas
		}
		if _, _, err := c.PutDatabase(ctx, db, client.DatabaseSpec{Partitions: last.Partitions, Replicas: replicas, Partitioner: last.Partitioner}); err != nil {
			return nil, fmt.Errorf("create database %s: %w", db, err)
		}
	default:
		return nil, err
	}
	if err := createTables(ctx, c, db, last.Tables); err != nil {
		return nil, err
	}
	t := &tracker{o: &o, total: last.Partitions}
	err = o.forEach(ctx, last.Partitions, func(ctx context.Context, p int) error {
		if done[p] {
			t.report(true, fmt.Sprintf("partition %d was restored at SCN %s already", p, last.Parts[p].SCN))
			return nil
		}
		if err := o.restorePartition(ctx, t, dir, db, p, chain); err != nil {
			return fmt.Errorf("partition %d: %w", p, err)
		}
		t.report(true, fmt.Sprintf("partition %d restored at SCN %s", p, last.Parts[p].SCN))
		return nil
	})
	return last, err
}

type partitionState struct {
	SCN       string `json:"scn"`
	Entry     string `json:"entry"`
	Restoring string `json:"restoring"`
}

// checkEmpty refuses a database any partition of which holds data or
// another backup's unfinished restore, and reports the partitions an
// earlier run of this restore finished: at the backup's SCN, with the same
// change-log entry there.
func (o *Options) checkEmpty(ctx context.Context, db string, m *Manifest) ([]bool, error) {
	done := make([]bool, m.Partitions)
	refused := make([]error, m.Partitions)
	err := o.forEach(ctx, m.Partitions, func(ctx context.Context, p int) error {
		refused[p] = o.checkPartition(ctx, db, m, p, done)
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, err := range refused { // the lowest partition's refusal, whatever the timing
		if err != nil {
			return nil, err
		}
	}
	return done, nil
}

// checkPartition is checkEmpty of partition p.
func (o *Options) checkPartition(ctx context.Context, db string, m *Manifest, p int, done []bool) error {
	var st partitionState
	err := o.retry(ctx, func() error {
		resp, err := o.call(ctx, http.MethodGet, partitionPath("restore", db, p), nil)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		return json.NewDecoder(resp.Body).Decode(&st)
	})
	part := m.Parts[p]
	switch {
	case err != nil:
		return fmt.Errorf("partition %d: %w", p, err)
	case st.Restoring != "" && st.Restoring != m.ID:
		return fmt.Errorf("database %s: partition %d holds an unfinished restore of backup %s; run that restore again, or restore into a new database", db, p, st.Restoring)
	case st.Restoring == "" && st.SCN != "0:0" && st.SCN == part.SCN && st.Entry != "" && st.Entry == part.Entry:
		done[p] = true
	case st.Restoring == "" && st.SCN != "0:0":
		return fmt.Errorf("database %s is not empty: partition %d is at SCN %s; a backup is restored only into an empty database", db, p, st.SCN)
	}
	return nil
}

// checkTables refuses a table of the database whose versions differ from
// the backup's.
func checkTables(ctx context.Context, c *client.Client, db string, d client.Database, tables []Table) error {
	for _, ts := range d.Tables {
		var want *Table
		for i := range tables {
			if tables[i].Name == ts.Name {
				want = &tables[i]
			}
		}
		if want == nil {
			continue // a table the backup does not have stays empty
		}
		if ts.Version > len(want.Versions) {
			return fmt.Errorf("database %s: table %s has %d schema versions, the backup %d", db, ts.Name, ts.Version, len(want.Versions))
		}
		for _, v := range want.Versions[:ts.Version] {
			got, err := c.GetTableVersion(ctx, db, ts.Name, v.Version)
			if err != nil {
				return err
			}
			if !sameJSON(got.Schema, v.Schema) {
				return fmt.Errorf("database %s: version %d of table %s differs from the backup's", db, v.Version, ts.Name)
			}
		}
	}
	return nil
}

func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// createTables registers every table's versions the database lacks, in
// order, so that stored documents name the same versions.
func createTables(ctx context.Context, c *client.Client, db string, tables []Table) error {
	for _, tb := range tables {
		have := 0
		cur, err := c.GetTable(ctx, db, tb.Name)
		var ce *client.Error
		switch {
		case err == nil:
			have = cur.Version
		case errors.As(err, &ce) && ce.Status == http.StatusNotFound:
		default:
			return err
		}
		for _, v := range tb.Versions[have:] {
			got, _, err := c.PutTable(ctx, db, tb.Name, client.TableSpec{Key: tb.Key, Schema: v.Schema})
			if err != nil {
				return fmt.Errorf("table %s version %d: %w", tb.Name, v.Version, err)
			}
			if got.Version != v.Version {
				return fmt.Errorf("table %s: registering version %d made version %d", tb.Name, v.Version, got.Version)
			}
		}
	}
	return nil
}

// restorePartition runs one partition's restore: begin, the tables of
// every backup of the chain, finish.
func (o *Options) restorePartition(ctx context.Context, t *tracker, dir, db string, p int, chain []*Manifest) error {
	last := chain[len(chain)-1]
	base := partitionPath("restore", db, p) + "?session=" + url.QueryEscape(last.ID)
	step := func(query string, body []byte) error {
		return o.retry(ctx, func() error {
			resp, err := o.call(ctx, http.MethodPost, base+query, body)
			if err != nil {
				return err
			}
			return resp.Body.Close()
		})
	}
	if err := step("&step=begin", nil); err != nil {
		return err
	}
	for _, m := range chain {
		for _, f := range m.Parts[p].Files {
			b, err := os.ReadFile(filepath.Join(dir, m.ID, f.Name))
			if err != nil {
				return err
			}
			q := fmt.Sprintf("&step=load&from=%s&sha256=%s", url.QueryEscape(m.Database), f.SHA256)
			if err := step(q, b); err != nil {
				return fmt.Errorf("backup %s, %s: %w", m.ID, f.Name, err)
			}
			t.add(int64(len(b)))
			t.report(false, "")
		}
	}
	return step("&step=finish&scn="+url.QueryEscape(last.Parts[p].SCN), nil)
}
