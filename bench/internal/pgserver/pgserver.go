// Package pgserver runs a private PostgreSQL cluster for the benchmarks:
// initdb in a directory of its own, durable settings (fsync and
// synchronous_commit on), reached by pgx over TCP on the loopback
// interface or over its Unix socket, and stopped and left on disk by
// Close. PostgreSQL is installed with apt-get when the machine lacks it.
package pgserver

import (
	"context"
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

// Config says where and how to run the cluster.
type Config struct {
	// Dir holds the data directory, the socket and the server's log.
	Dir string
	// Clients is the connections the pool may open; the server allows a
	// few more.
	Clients int
	// Unix reaches the server over its Unix socket rather than TCP.
	Unix bool
	// SharedBuffers is postgresql.conf's shared_buffers; "" means 2GB.
	SharedBuffers string
	// Logf reports installing and starting.
	Logf func(format string, args ...any)
}

// Server is a running private cluster and a pool of connections to it.
type Server struct {
	Dir, Data, Sock, Bin string
	Port                 int
	Pool                 *pgxpool.Pool
}

// Find returns the directory holding initdb and pg_ctl, installing
// PostgreSQL with apt-get when there is none.
func Find(logf func(string, ...any)) (string, error) {
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

// Start creates and starts a cluster under cfg.Dir and connects a pool.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.SharedBuffers == "" {
		cfg.SharedBuffers = "2GB"
	}
	bin, err := Find(cfg.Logf)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: cfg.Dir, Data: filepath.Join(cfg.Dir, "data"), Sock: filepath.Join(cfg.Dir, "sock"), Bin: bin, Port: port}
	for _, d := range []string{s.Dir, s.Sock} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if os.Geteuid() == 0 {
		if err := giveToPostgres(s.Dir, s.Sock); err != nil {
			return nil, err
		}
	}
	cfg.Logf("postgres: initdb and start a private cluster in %s (binaries in %s)", s.Data, bin)
	if err := run(asPostgres(filepath.Join(bin, "initdb"), "-D", s.Data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-locale")); err != nil {
		return nil, err
	}
	conf := strings.Join([]string{
		"listen_addresses = '127.0.0.1'",
		"unix_socket_directories = '" + s.Sock + "'",
		"port = " + strconv.Itoa(s.Port),
		"fsync = on",
		"synchronous_commit = on",
		"full_page_writes = on",
		"shared_buffers = " + cfg.SharedBuffers,
		"max_connections = " + strconv.Itoa(cfg.Clients+20),
		"max_wal_size = 4GB",
		"maintenance_work_mem = 512MB",
		"",
	}, "\n")
	f, err := os.OpenFile(filepath.Join(s.Data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
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
	if err := run(asPostgres(filepath.Join(bin, "pg_ctl"), "-D", s.Data, "-l", filepath.Join(s.Dir, "server.log"), "-w", "-t", "120", "start")); err != nil {
		return nil, err
	}
	host := "127.0.0.1"
	if cfg.Unix {
		host = s.Sock
	}
	pc, err := pgxpool.ParseConfig(fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres", host, s.Port))
	if err != nil {
		s.Close()
		return nil, err
	}
	pc.MaxConns = int32(cfg.Clients + 4)
	if s.Pool, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// giveToPostgres lets user postgres, which the server runs as, reach dir
// and own it and sock.
func giveToPostgres(dir, sock string) error {
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("postgres: running as root needs a postgres user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	for d := dir; d != "/" && d != "."; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o005 != 0o005 {
			if err := os.Chmod(d, fi.Mode().Perm()|0o005); err != nil {
				return err
			}
		}
	}
	for _, d := range []string{dir, sock} {
		if err := os.Chown(d, uid, gid); err != nil {
			return err
		}
	}
	return nil
}

// Exec runs each statement in turn, naming the one that fails.
func (s *Server) Exec(ctx context.Context, statements ...string) error {
	for _, q := range statements {
		if _, err := s.Pool.Exec(ctx, q); err != nil {
			return fmt.Errorf("postgres: %s: %w", q, err)
		}
	}
	return nil
}

// Copy streams rows into table's columns in one COPY (one transaction)
// and returns how many it wrote; next returns the next row, or nil after
// the last.
func (s *Server) Copy(ctx context.Context, table string, columns []string, next func() ([]any, error)) (int64, error) {
	return s.Pool.CopyFrom(ctx, pgx.Identifier{table}, columns, pgx.CopyFromFunc(next))
}

// Version is the server's version line (`postgres --version`).
func (s *Server) Version() string {
	out, err := exec.Command(filepath.Join(s.Bin, "postgres"), "--version").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// Pids are the postmaster's and its children's (the backends' and the
// background workers'), for reading their CPU time.
func (s *Server) Pids() ([]int, error) {
	b, err := os.ReadFile(filepath.Join(s.Data, "postmaster.pid"))
	if err != nil {
		return nil, err
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pm, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		return nil, fmt.Errorf("postmaster.pid: %w", err)
	}
	out := []int{pm}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := benchutil.ProcStat(pid); err == nil && len(st) > 1 && st[1] == strconv.Itoa(pm) {
			out = append(out, pid)
		}
	}
	return out, nil
}

// Close closes the pool and stops the cluster (fast shutdown).
func (s *Server) Close() error {
	if s.Pool != nil {
		s.Pool.Close()
	}
	return run(asPostgres(filepath.Join(s.Bin, "pg_ctl"), "-D", s.Data, "-m", "fast", "-w", "stop"))
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
