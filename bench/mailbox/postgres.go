package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/doppio-db/doppio/bench/internal/mailboxdata"
	"github.com/doppio-db/doppio/bench/internal/pgserver"
)

// postgresSystem is a private PostgreSQL cluster in a temporary directory,
// reached by pgx over TCP on the loopback interface, as Doppio and Bleve
// over HTTP are (or, as postgres-unix, over its Unix socket, which spares
// it the TCP stack's work on both sides). Documents are JSONB in one
// table:
//
//	messages(mailbox_id text, message_id bigint, doc jsonb, primary key (mailbox_id, message_id))
//
// The four indexed fields are expression indexes on the JSONB (the document
// stays the only copy of each value; generated columns would duplicate them):
//
//	(mailbox_id, (doc->>'isInbox')::boolean, (doc->>'createdOn')::bigint DESC)   btree, the paper's inbox query
//	(mailbox_id, doc->>'senderId')                                               btree
//	gin (mailbox_id, to_tsvector('simple', doc->>'body'))                         GIN with btree_gin, so a text
//	                                                                              query reads one mailbox's lists
//
// synchronous_commit and fsync are on: a commit returns after its WAL is
// flushed.
type postgresSystem struct {
	*pgserver.Server
	unix bool // reached over the Unix socket, not TCP
}

func openPostgres(ctx context.Context, dir string, clients int, unix bool, logf func(string, ...any)) (*postgresSystem, error) {
	srv, err := pgserver.Start(ctx, pgserver.Config{Dir: dir, Clients: clients, Unix: unix, Logf: logf})
	if err != nil {
		return nil, err
	}
	s := &postgresSystem{Server: srv, unix: unix}
	if err := s.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS btree_gin`, mailboxdata.PostgresTable); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *postgresSystem) Name() string {
	if s.unix {
		return "PostgreSQL over a Unix socket"
	}
	return "PostgreSQL"
}

// Load copies a mailbox's messages in one COPY (one transaction).
func (s *postgresSystem) Load(ctx context.Context, mailbox string, msgs []mailboxdata.Message) error {
	i := 0
	_, err := s.Copy(ctx, "messages", []string{"mailbox_id", "message_id", "doc"}, func() ([]any, error) {
		if i == len(msgs) {
			return nil, nil
		}
		doc, err := json.Marshal(msgs[i])
		i++
		return []any{mailbox, int64(i), doc}, err
	})
	return err
}

// Ready builds the indexes over the loaded rows, then vacuums, analyzes and
// checkpoints, so the measured requests start from a settled cluster.
func (s *postgresSystem) Ready(ctx context.Context) error {
	return s.Exec(ctx, append(mailboxdata.PostgresIndexes, `VACUUM ANALYZE messages`, `CHECKPOINT`)...)
}

func (s *postgresSystem) Insert(ctx context.Context, mailbox string, id int64, m mailboxdata.Message) error {
	doc, err := json.Marshal(m)
	if err != nil {
		return err
	}
	_, err = s.Pool.Exec(ctx, `INSERT INTO messages (mailbox_id, message_id, doc) VALUES ($1, $2, $3)`, mailbox, id, doc)
	return err
}

func (s *postgresSystem) Inbox(ctx context.Context, mailbox string, limit int) ([]Hit, error) {
	return s.query(ctx, `SELECT message_id, doc FROM messages
		WHERE mailbox_id = $1 AND (doc->>'isInbox')::boolean = true
		ORDER BY (doc->>'createdOn')::bigint DESC LIMIT $2`, mailbox, limit)
}

func (s *postgresSystem) Search(ctx context.Context, mailbox, word string, limit int) ([]Hit, error) {
	return s.query(ctx, `SELECT message_id, doc FROM messages
		WHERE mailbox_id = $1 AND to_tsvector('simple', doc->>'body') @@ plainto_tsquery('simple', $3)
		ORDER BY (doc->>'createdOn')::bigint DESC LIMIT $2`, mailbox, limit, word)
}

func (s *postgresSystem) query(ctx context.Context, sql string, args ...any) ([]Hit, error) {
	rows, err := s.Pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	var hits []Hit
	for rows.Next() {
		var h Hit
		if err := rows.Scan(&h.ID, &h.Doc); err != nil {
			rows.Close()
			return nil, err
		}
		hits = append(hits, h)
	}
	return hits, rows.Err()
}

// Explain returns the plans of the two queries on one mailbox, for the
// report.
func (s *postgresSystem) Explain(ctx context.Context, mailbox, word string) (string, error) {
	var b strings.Builder
	for _, q := range []string{
		fmt.Sprintf(`EXPLAIN SELECT message_id, doc FROM messages WHERE mailbox_id = '%s' AND (doc->>'isInbox')::boolean = true ORDER BY (doc->>'createdOn')::bigint DESC LIMIT 20`, mailbox),
		fmt.Sprintf(`EXPLAIN SELECT message_id, doc FROM messages WHERE mailbox_id = '%s' AND to_tsvector('simple', doc->>'body') @@ plainto_tsquery('simple', '%s') ORDER BY (doc->>'createdOn')::bigint DESC LIMIT 20`, mailbox, word),
	} {
		rows, err := s.Pool.Query(ctx, q)
		if err != nil {
			return "", err
		}
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				rows.Close()
				return "", err
			}
			b.WriteString(line + "\n")
		}
		if err := rows.Err(); err != nil {
			return "", err
		}
		b.WriteString("\n")
	}
	return b.String(), nil
}

func (s *postgresSystem) DiskBytes() int64 { return dirBytes(s.Data) }
