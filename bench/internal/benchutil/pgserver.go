package benchutil

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Postgres is a private PostgreSQL cluster a benchmark started: its own
// data directory, on a loopback port, with trust authentication for the
// user postgres.
type Postgres struct {
	Bin  string // the directory of initdb and pg_ctl
	Dir  string // data/, the socket and server.log
	Port int
}

// StartPostgres installs PostgreSQL with apt-get when PostgresBin finds
// none, initialises a cluster under dir, appends conf (postgresql.conf
// lines) to its configuration and starts it on port of 127.0.0.1. As
// root, the server runs as the user postgres (Debian's package makes it).
func StartPostgres(ctx context.Context, dir string, port int, conf []string, logf func(string, ...any)) (*Postgres, error) {
	bin := PostgresBin()
	if bin == "" {
		for _, args := range [][]string{{"apt-get", "update"}, {"apt-get", "install", "-y", "postgresql"}} {
			logf("postgres: not installed; running %s", strings.Join(args, " "))
			cmd := exec.CommandContext(ctx, args[0], args[1:]...)
			cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
			if out, err := cmd.CombinedOutput(); err != nil {
				return nil, fmt.Errorf("%s: %w\n%s", strings.Join(args, " "), err, out)
			}
		}
		if bin = PostgresBin(); bin == "" {
			return nil, errors.New("postgres: initdb and pg_ctl not found after installing postgresql")
		}
	}
	p := &Postgres{Bin: bin, Dir: dir, Port: port}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := ownedByPostgres(dir); err != nil {
		return nil, err
	}
	logf("postgres: initdb and start in %s (binaries in %s)", p.data(), bin)
	if err := p.run(ctx, "initdb", "-D", p.data(), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-locale"); err != nil {
		return nil, err
	}
	lines := append([]string{"listen_addresses = '127.0.0.1'", "port = " + strconv.Itoa(port),
		"unix_socket_directories = '" + dir + "'"}, conf...)
	f, err := os.OpenFile(filepath.Join(p.data(), "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	_, err = f.WriteString(strings.Join(lines, "\n") + "\n")
	if err := errors.Join(err, f.Close()); err != nil {
		return nil, err
	}
	if err := p.run(ctx, "pg_ctl", "-D", p.data(), "-l", filepath.Join(dir, "server.log"), "-w", "-t", "120", "start"); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *Postgres) data() string { return filepath.Join(p.Dir, "data") }

// DSN is the connection string of the database postgres over TCP.
func (p *Postgres) DSN() string {
	return fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=postgres", p.Port)
}

// Stop stops the server (fast shutdown).
func (p *Postgres) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return p.run(ctx, "pg_ctl", "-D", p.data(), "-m", "fast", "-w", "stop")
}

// Pids are the postmaster's and its children's (the backends' and the
// background workers'), for reading their CPU time.
func (p *Postgres) Pids() ([]int, error) {
	b, err := os.ReadFile(filepath.Join(p.data(), "postmaster.pid"))
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
		if st, err := ProcStat(pid); err == nil && len(st) > 1 && st[1] == strconv.Itoa(pm) {
			out = append(out, pid)
		}
	}
	return out, nil
}

// ProcStat returns the fields of /proc/<pid>/stat after the command (which
// may hold spaces): the state first, the parent's pid second, utime and
// stime the 12th and 13th.
func ProcStat(pid int) ([]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, err
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:]), nil
}

// run runs PostgreSQL's program name, as user postgres when we are root
// (the server refuses to run as root).
func (p *Postgres) run(ctx context.Context, name string, args ...string) error {
	path := filepath.Join(p.Bin, name)
	cmd := exec.CommandContext(ctx, path, args...)
	if os.Geteuid() == 0 {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	return nil
}

// ownedByPostgres, when we are root, gives dir to the user postgres and
// lets it reach dir through every parent.
func ownedByPostgres(dir string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("postgres: running as root needs a postgres user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	for d := filepath.Dir(dir); d != "/" && d != "."; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o005 != 0o005 {
			if err := os.Chmod(d, fi.Mode().Perm()|0o005); err != nil {
				return err
			}
		}
	}
	return os.Chown(dir, uid, gid)
}
