package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/doppio-db/doppio/bench/internal/benchutil"
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
	dir, data, sock, bin string
	unix                 bool // reached over the Unix socket, not TCP
	port                 int
	pool                 *pgxpool.Pool
}

// findPostgres returns the directory holding initdb and pg_ctl, installing
// PostgreSQL with apt-get when there is none.
func findPostgres(logf func(string, ...any)) (string, error) {
	if d := benchutil.PostgresBin(); d != "" {
		return d, nil
	}
	for _, args := range [][]string{{"apt-get", "update"}, {"apt-get", "install", "-y", "postgresql"}} {
		logf("postgres: initdb not found; running %s", strings.Join(args, " "))
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("%s: %w", strings.Join(args, " "), err)
		}
	}
	if d := benchutil.PostgresBin(); d != "" {
		return d, nil
	}
	return "", errors.New("postgres: initdb and pg_ctl not found after installing postgresql")
}

// asPostgres runs a PostgreSQL program, as user postgres when we are root
// (the server refuses to run as root).
func asPostgres(name string, args ...string) *exec.Cmd {
	if os.Geteuid() == 0 {
		return exec.Command("runuser", append([]string{"-u", "postgres", "--", name}, args...)...)
	}
	return exec.Command(name, args...)
}

func run(cmd *exec.Cmd) error {
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	return nil
}

func openPostgres(ctx context.Context, dir string, clients int, unix bool, logf func(string, ...any)) (*postgresSystem, error) {
	bin, err := findPostgres(logf)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &postgresSystem{dir: dir, data: filepath.Join(dir, "data"), sock: filepath.Join(dir, "sock"), bin: bin, unix: unix, port: port}
	for _, d := range []string{s.dir, s.sock} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if os.Geteuid() == 0 {
		// The server runs as postgres: it must reach and own its directories.
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("postgres: running as root needs a postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		for d := s.dir; d != "/" && d != "."; d = filepath.Dir(d) {
			if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o005 != 0o005 {
				if err := os.Chmod(d, fi.Mode().Perm()|0o005); err != nil {
					return nil, err
				}
			}
		}
		for _, d := range []string{s.dir, s.sock} {
			if err := os.Chown(d, uid, gid); err != nil {
				return nil, err
			}
		}
	}
	logf("postgres: initdb and start a private cluster in %s (binaries in %s)", s.data, bin)
	if err := run(asPostgres(filepath.Join(bin, "initdb"), "-D", s.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-locale")); err != nil {
		return nil, err
	}
	conf := strings.Join([]string{
		"listen_addresses = '127.0.0.1'",
		"unix_socket_directories = '" + s.sock + "'",
		"port = " + strconv.Itoa(s.port),
		"fsync = on",
		"synchronous_commit = on",
		"full_page_writes = on",
		"shared_buffers = 2GB",
		"max_connections = " + strconv.Itoa(clients+20),
		"max_wal_size = 4GB",
		"maintenance_work_mem = 512MB",
		"",
	}, "\n")
	f, err := os.OpenFile(filepath.Join(s.data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	if _, err := f.WriteString(conf); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	if err := run(asPostgres(filepath.Join(bin, "pg_ctl"), "-D", s.data, "-l", filepath.Join(s.dir, "server.log"), "-w", "-t", "120", "start")); err != nil {
		return nil, err
	}
	host := "127.0.0.1"
	if s.unix {
		host = s.sock
	}
	cfg, err := pgxpool.ParseConfig(fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres", host, s.port))
	if err != nil {
		s.Close()
		return nil, err
	}
	cfg.MaxConns = int32(clients + 4)
	if s.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		s.Close()
		return nil, err
	}
	for _, q := range []string{
		`CREATE EXTENSION IF NOT EXISTS btree_gin`,
		`CREATE TABLE messages (mailbox_id text NOT NULL, message_id bigint NOT NULL, doc jsonb NOT NULL, PRIMARY KEY (mailbox_id, message_id))`,
	} {
		if _, err := s.pool.Exec(ctx, q); err != nil {
			s.Close()
			return nil, fmt.Errorf("postgres: %s: %w", q, err)
		}
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
func (s *postgresSystem) Load(ctx context.Context, mailbox string, msgs []Message) error {
	rows := make([][]any, len(msgs))
	for i, m := range msgs {
		doc, err := json.Marshal(m)
		if err != nil {
			return err
		}
		rows[i] = []any{mailbox, int64(i + 1), doc}
	}
	_, err := s.pool.CopyFrom(ctx, pgx.Identifier{"messages"}, []string{"mailbox_id", "message_id", "doc"}, pgx.CopyFromRows(rows))
	return err
}

// Ready builds the indexes over the loaded rows, then vacuums, analyzes and
// checkpoints, so the measured requests start from a settled cluster.
func (s *postgresSystem) Ready(ctx context.Context) error {
	for _, q := range []string{
		`CREATE INDEX messages_inbox ON messages (mailbox_id, ((doc->>'isInbox')::boolean), ((doc->>'createdOn')::bigint) DESC)`,
		`CREATE INDEX messages_sender ON messages (mailbox_id, (doc->>'senderId'))`,
		`CREATE INDEX messages_body ON messages USING gin (mailbox_id, to_tsvector('simple', doc->>'body'))`,
		`VACUUM ANALYZE messages`,
		`CHECKPOINT`,
	} {
		if _, err := s.pool.Exec(ctx, q); err != nil {
			return fmt.Errorf("postgres: %s: %w", q, err)
		}
	}
	return nil
}

func (s *postgresSystem) Insert(ctx context.Context, mailbox string, id int64, m Message) error {
	doc, err := json.Marshal(m)
	if err != nil {
		return err
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO messages (mailbox_id, message_id, doc) VALUES ($1, $2, $3)`, mailbox, id, doc)
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
	rows, err := s.pool.Query(ctx, sql, args...)
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
		rows, err := s.pool.Query(ctx, q)
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

func (s *postgresSystem) DiskBytes() int64 { return dirBytes(s.data) }

// Close stops the cluster (fast shutdown).
func (s *postgresSystem) Close() error {
	if s.pool != nil {
		s.pool.Close()
	}
	return run(asPostgres(filepath.Join(s.bin, "pg_ctl"), "-D", s.data, "-m", "fast", "-w", "stop"))
}

// freePort returns a TCP port of the loopback interface that was free a
// moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
