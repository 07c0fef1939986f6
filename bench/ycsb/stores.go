package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/doppio-db/doppio/internal/certs"
	"github.com/doppio-db/doppio/internal/testport"

	"github.com/doppio-db/doppio/bench/internal/benchutil"
)

// store is one system under test, started privately in its own directory.
type store interface {
	// Binding is the YCSB DB class and the properties that reach this store.
	Binding() (class string, props map[string]string)
	// Settings describes the exact durability and sizing settings, for the report.
	Settings() string
	// PprofAddr is the store's pprof listener (Doppio's first node), or "".
	PprofAddr() string
	Close() error
}

type storeSpec struct {
	ID    string // doppio-1, doppio-3, postgres, mariadb
	Label string
}

var allStores = []storeSpec{
	{"doppio-1", "Doppio, 1 node"},
	{"doppio-3", "Doppio, 3 nodes × 3 replicas"},
	{"postgres", "PostgreSQL"},
	{"mariadb", "MariaDB"},
	{"doppio-1-secure", "Doppio, 1 node, TLS + token"},
	{"doppio-3-secure", "Doppio, 3 nodes × 3 replicas, TLS + token"},
	{"postgres-secure", "PostgreSQL, TLS + SCRAM"},
}

// freePort returns a port free now for a store to bind, below the kernel's
// ephemeral range (see testport).
func freePort() (int, error) {
	addr, err := testport.Free("127.0.0.1")
	if err != nil {
		return 0, err
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(port)
}

// freePorts finds n consecutive free ports and returns the first.
func freePorts(n int) (int, error) {
	for range 100 {
		base, err := freePort()
		if err != nil {
			return 0, err
		}
		free := true
		for i := 1; i < n && free; i++ {
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+i))
			if err != nil {
				free = false
				break
			}
			ln.Close()
		}
		if free {
			return base, nil
		}
	}
	return 0, fmt.Errorf("no %d consecutive free ports", n)
}

func run(cmd *exec.Cmd) error {
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	return nil
}

// aptInstall installs a Debian package when its program is absent.
func aptInstall(pkg string, logf func(string, ...any)) error {
	for _, args := range [][]string{{"apt-get", "update"}, {"apt-get", "install", "-y", pkg}} {
		logf("%s", strings.Join(args, " "))
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s: %w", strings.Join(args, " "), err)
		}
	}
	return nil
}

// asUser runs a program as the given system user when we are root (database
// servers refuse to run as root), else as ourselves.
func asUser(name, prog string, args ...string) *exec.Cmd {
	if os.Geteuid() == 0 {
		return exec.Command("runuser", append([]string{"-u", name, "--", prog}, args...)...)
	}
	return exec.Command(prog, args...)
}

// giveTo makes dir owned by the system user (when root) and its parents
// traversable, so a server running as that user reaches it.
func giveTo(name, dir string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return fmt.Errorf("running as root needs a %s user: %w", name, err)
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
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

// ---- Doppio ----

// doppioStore is `doppio dev` (one node) or `doppio dev --nodes 3`, the built
// binary as users run it, with the YCSB database created over REST.
type doppioStore struct {
	cmd        *exec.Cmd
	urls       []string
	nodes      int
	partitions int
	pprof      string
	rowCache   int64  // --row-cache-bytes
	httpClient string // the binding's doppio.http
	routing    string // the binding's doppio.routing
	logPath    string
	done       chan error
	// secure: `doppio dev --secure`; hc trusts the cluster's CA and authz
	// is the root user's session token, for setup and for the binding.
	secure bool
	hc     *http.Client
	ca     string
	authz  string
}

// groupPrefix is the length of the YCSB key prefix that is a Doppio document
// group: "user" and 3 digits, about 900 groups. Longer means fewer writes
// contending for a group's latch (reads of a group wait for its writes in
// flight) but more requests per scan, which reads one group at a time.
const groupPrefix = 7

const ycsbTableSchema = `{"key":[{"name":"g","type":"string"},{"name":"k","type":"string"}],
 "schema":{"type":"record","name":"UserRecord","fields":[%s]}}`

func tableSchema(fields int) string {
	var fs []string
	for i := 0; i < fields; i++ {
		fs = append(fs, fmt.Sprintf(`{"name":"field%d","type":"string","default":""}`, i))
	}
	return fmt.Sprintf(ycsbTableSchema, strings.Join(fs, ","))
}

var nodeLine = regexp.MustCompile(`^node (n\d+): (https?://\S+)`)

func startDoppio(ctx context.Context, bin, dir string, nodes, partitions, fields int, rowCache int64, httpClient, routing string, secure bool, logf func(string, ...any)) (*doppioStore, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &doppioStore{nodes: nodes, partitions: partitions, rowCache: rowCache, httpClient: httpClient, routing: routing, logPath: filepath.Join(dir, "doppio.log"), done: make(chan error, 1),
		secure: secure, hc: http.DefaultClient}
	data := filepath.Join(dir, "data")
	args := []string{"dev", "--data", data, "--http", fmt.Sprintf("127.0.0.1:%d", port), "--row-cache-bytes", strconv.FormatInt(rowCache, 10)}
	if secure {
		args = append(args, "--secure")
	}
	// Node i of a cluster serves pprof on the port plus i-1; n1's is profiled.
	pp, err := freePorts(nodes)
	if err != nil {
		return nil, err
	}
	s.pprof = fmt.Sprintf("127.0.0.1:%d", pp)
	args = append(args, "--pprof", s.pprof)
	if nodes > 1 {
		args = append(args, "--nodes", strconv.Itoa(nodes))
	}
	logFile, err := os.Create(s.logPath)
	if err != nil {
		return nil, err
	}
	s.cmd = exec.Command(bin, args...)
	s.cmd.Stderr = logFile
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	logf("doppio: %s %s", bin, strings.Join(args, " "))
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	found := make(chan string, nodes)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			fmt.Fprintln(logFile, sc.Text())
			if m := nodeLine.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[2]
			}
		}
	}()
	go func() { s.done <- s.cmd.Wait(); logFile.Close() }()
	if nodes > 1 {
		deadline := time.After(time.Minute)
		for len(s.urls) < nodes {
			select {
			case u := <-found:
				s.urls = append(s.urls, u)
			case <-deadline:
				s.Close()
				return nil, fmt.Errorf("doppio: %d node addresses after a minute; see %s", len(s.urls), s.logPath)
			}
		}
	} else {
		s.urls = []string{fmt.Sprintf("%s://127.0.0.1:%d", s.scheme(), port)}
	}
	if secure {
		if err := s.login(ctx, data); err != nil {
			s.Close()
			return nil, err
		}
	}
	if err := s.setup(ctx, fields); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *doppioStore) scheme() string {
	if s.secure {
		return "https"
	}
	return "http"
}

// login trusts the CA `doppio dev --secure` made under data and logs in as
// root with the password it wrote there, as a user following its printed
// instructions would.
func (s *doppioStore) login(ctx context.Context, data string) error {
	s.ca = filepath.Join(data, "certs", certs.CAFile)
	// The files appear once the cluster has started and set the password.
	return retry(ctx, "POST /_auth/login", func() error {
		pem, err := os.ReadFile(s.ca)
		if err != nil {
			return err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("doppio: no certificate in %s", s.ca)
		}
		s.hc = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		pw, err := os.ReadFile(filepath.Join(data, "root.password"))
		if err != nil {
			return err
		}
		body, _ := json.Marshal(map[string]string{"user": "root", "password": strings.TrimSpace(string(pw))})
		code, b, err := s.do(ctx, "POST", s.urls[0]+"/_auth/login", body)
		if err == nil && code != 200 {
			err = fmt.Errorf("%d %s", code, b)
		}
		var tok struct {
			Token string `json:"token"`
		}
		if err == nil {
			err = json.Unmarshal(b, &tok)
		}
		if err == nil {
			s.authz = "Bearer " + tok.Token
		}
		return err
	})
}

// do sends a request with the store's client and credentials.
func (s *doppioStore) do(ctx context.Context, method, url string, body []byte) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if s.authz != "" {
		req.Header.Set("Authorization", s.authz)
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// retry calls f until it succeeds or a minute passes.
func retry(ctx context.Context, what string, f func() error) error {
	deadline := time.Now().Add(time.Minute)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// setup waits for every node, creates the database and table, and writes
// then deletes a probe document in 100 groups, so every partition has a
// leader taking writes before YCSB starts.
func (s *doppioStore) setup(ctx context.Context, fields int) error {
	for _, u := range s.urls {
		if err := retry(ctx, "doppio "+u+" ready", func() error {
			code, b, err := s.do(ctx, "GET", u+"/readyz", nil)
			if err == nil && code != 200 {
				err = fmt.Errorf("%d %s", code, b)
			}
			return err
		}); err != nil {
			return err
		}
	}
	put := func(path, body string) error {
		return retry(ctx, "PUT "+path, func() error {
			code, b, err := s.do(ctx, "PUT", s.urls[0]+path, []byte(body))
			if err == nil && code != 200 && code != 201 {
				err = fmt.Errorf("%d %s", code, b)
			}
			return err
		})
	}
	if err := put("/_schemas/ycsb", fmt.Sprintf(`{"partitions":%d,"replicas":%d}`, s.partitions, s.nodes)); err != nil {
		return err
	}
	if err := put("/_schemas/ycsb/usertable", tableSchema(fields)); err != nil {
		return err
	}
	for i := 0; i < 100; i++ {
		for _, u := range s.urls {
			path := fmt.Sprintf("%s/ycsb/usertable/user%03d/probe", u, i*10)
			if err := retry(ctx, "probe "+path, func() error {
				code, b, err := s.do(ctx, "PUT", path, []byte(`{"field0":"probe"}`))
				if err == nil && code != 200 && code != 201 {
					err = fmt.Errorf("%d %s", code, b)
				}
				return err
			}); err != nil {
				return err
			}
		}
		path := fmt.Sprintf("%s/ycsb/usertable/user%03d/probe", s.urls[0], i*10)
		if code, b, err := s.do(ctx, "DELETE", path, nil); err != nil || code != 204 {
			return fmt.Errorf("DELETE %s: %d %s %v", path, code, b, err)
		}
	}
	return nil
}

func (s *doppioStore) Binding() (string, map[string]string) {
	props := map[string]string{"doppio.urls": strings.Join(s.urls, ","), "doppio.groupprefix": strconv.Itoa(groupPrefix), "doppio.http": s.httpClient, "doppio.routing": s.routing}
	if s.secure {
		props["doppio.cafile"], props["doppio.authorization"] = s.ca, s.authz
	}
	return "org.doppio.ycsb.DoppioClient", props
}

func (s *doppioStore) Settings() string {
	mode := "`doppio dev` (one node process with embedded etcd)"
	if s.nodes > 1 {
		mode = fmt.Sprintf("`doppio dev --nodes %d` (embedded etcd, %d `doppio start` node processes on this machine)", s.nodes, s.nodes)
	}
	if s.secure {
		mode += ", `--secure`: TLS on every link (REST verified against the dev CA), every request carrying root's session token from `POST /_auth/login`"
	}
	return fmt.Sprintf("%s; database `ycsb` with %d hash partitions, %d replica(s) each (Raft); table `usertable` keyed (g, k): g = the first %d characters of the YCSB key (about 900 document groups), k = the key; "+
		"documents: Avro record of field0..field9 strings; every write acknowledged after its Raft commit and a synced Pebble batch (defaults). "+
		"Caches per node: `--row-cache-bytes %d` (%d MiB of documents) and Pebble's default 512 MiB block cache. "+
		"%s HTTP client: %s.", mode, s.partitions, s.nodes, groupPrefix, s.rowCache, s.rowCache>>20, routingDesc[s.routing], httpClientDesc[s.httpClient])
}

var routingDesc = map[string]string{
	"smart": "Each request goes straight to its partition's leader (`doppio.routing=smart`: leaders from `GET /_cluster` at start, partition = xxhash64 of the encoded partition key, as the Go client's smart routing).",
	"node":  "YCSB threads spread over the nodes' REST addresses round robin (`doppio.routing=node`); a node forwards what it does not lead.",
}

var httpClientDesc = map[string]string{
	"socket": "`doppio.http=socket`, a blocking keep-alive HTTP/1.1 connection per YCSB thread (as each JDBC thread has its own connection)",
	"jdk":    "`doppio.http=jdk`, one java.net.http.HttpClient shared by the threads (HTTP/1.1 keep-alive)",
}

func (s *doppioStore) PprofAddr() string { return s.pprof }

func (s *doppioStore) Close() error {
	if s.cmd == nil || s.cmd.Process == nil {
		return nil
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
	return nil
}

// ---- PostgreSQL ----

type postgresStore struct {
	bin, data, logPath string
	port               int
	conf               []string
	// secure: TLS (verify-full against ca) and scram-sha-256 passwords,
	// as a production PostgreSQL is reached.
	secure bool
	ca     string
}

// postgresPassword is the secure cluster's password of user postgres.
const postgresPassword = "ycsb-secret"

// secureConf makes dir's PostgreSQL data directory answer TCP only over TLS
// with a SCRAM-SHA-256 password: a server certificate for 127.0.0.1 signed by
// a CA of its own (ca.crt in dir), and a pg_hba.conf with nothing else.
func (s *postgresStore) secureConf(dir string) error {
	certDir := filepath.Join(dir, "certs")
	if err := certs.CreateCA(certDir, certs.Options{}); err != nil {
		return err
	}
	if err := certs.CreateNode(certDir, []string{"127.0.0.1", "localhost"}, certs.Options{}); err != nil {
		return err
	}
	s.ca = filepath.Join(certDir, certs.CAFile)
	for _, f := range []string{certs.NodeCertFile, certs.NodeKeyFile} {
		b, err := os.ReadFile(filepath.Join(certDir, f))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(s.data, "server."+strings.TrimPrefix(f, "node.")), b, 0o600); err != nil {
			return err
		}
	}
	hba := "local all all trust\nhostssl all all 127.0.0.1/32 scram-sha-256\n"
	if err := os.WriteFile(filepath.Join(s.data, "pg_hba.conf"), []byte(hba), 0o600); err != nil {
		return err
	}
	s.conf = append(s.conf, "ssl = on", "ssl_cert_file = 'server.crt'", "ssl_key_file = 'server.key'", "password_encryption = 'scram-sha-256'")
	return giveTo("postgres", dir)
}

func startPostgres(ctx context.Context, dir string, threads int, secure bool, logf func(string, ...any)) (*postgresStore, error) {
	bin := benchutil.PostgresBin()
	if bin == "" {
		if err := aptInstall("postgresql", logf); err != nil {
			return nil, err
		}
		if bin = benchutil.PostgresBin(); bin == "" {
			return nil, errors.New("postgres: initdb not found after installing postgresql")
		}
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &postgresStore{bin: bin, data: filepath.Join(dir, "data"), logPath: filepath.Join(dir, "server.log"), port: port, secure: secure}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := giveTo("postgres", dir); err != nil {
		return nil, err
	}
	logf("postgres: initdb in %s (binaries in %s)", s.data, bin)
	if err := run(asUser("postgres", filepath.Join(bin, "initdb"), "-D", s.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-locale")); err != nil {
		return nil, err
	}
	s.conf = []string{
		"listen_addresses = '127.0.0.1'",
		fmt.Sprintf("port = %d", port),
		"unix_socket_directories = '" + dir + "'",
		"fsync = on",
		"synchronous_commit = on",
		"full_page_writes = on",
		"wal_sync_method = fdatasync",
		"shared_buffers = 1GB",
		"max_wal_size = 1GB",
		fmt.Sprintf("max_connections = %d", threads*2+20),
	}
	if secure {
		if err := s.secureConf(dir); err != nil {
			return nil, err
		}
	}
	f, err := os.OpenFile(filepath.Join(s.data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	_, err = f.WriteString(strings.Join(s.conf, "\n") + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	if err := run(asUser("postgres", filepath.Join(bin, "pg_ctl"), "-D", s.data, "-l", s.logPath, "-w", "-t", "120", "start")); err != nil {
		return nil, err
	}
	if secure {
		setPw := fmt.Sprintf("ALTER USER postgres PASSWORD '%s'", postgresPassword)
		if err := run(asUser("postgres", filepath.Join(bin, "psql"), "-h", dir, "-p", strconv.Itoa(port), "-U", "postgres", "-c", setPw)); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *postgresStore) Binding() (string, map[string]string) {
	url := fmt.Sprintf("jdbc:postgresql://127.0.0.1:%d/postgres", s.port)
	props := map[string]string{"jdbc.user": "postgres", "jdbc.create": "true"}
	if s.secure {
		url += "?sslmode=verify-full&sslrootcert=" + s.ca
		props["jdbc.password"] = postgresPassword
	}
	props["jdbc.url"] = url
	return "org.doppio.ycsb.PostgresClient", props
}

func (s *postgresStore) Settings() string {
	how := ""
	if s.secure {
		how = "TLS (pgJDBC sslmode=verify-full) and a scram-sha-256 password (pg_hba.conf: hostssl only); "
	}
	return how + "private cluster (initdb, no locale, C collation) over TCP loopback, pgJDBC, autocommit; table `usertable(ycsb_key varchar(255) PRIMARY KEY, doc jsonb NOT NULL)`; postgresql.conf: `" +
		strings.Join(s.conf[3:], "`, `") + "`"
}

func (s *postgresStore) PprofAddr() string { return "" }

func (s *postgresStore) Close() error {
	return run(asUser("postgres", filepath.Join(s.bin, "pg_ctl"), "-D", s.data, "-m", "fast", "-w", "stop"))
}

func postgresVersion() string {
	bin := benchutil.PostgresBin()
	if bin == "" {
		return ""
	}
	out, _ := exec.Command(filepath.Join(bin, "postgres"), "--version").Output()
	return strings.TrimSpace(string(out))
}

// ---- MariaDB ----

type mariadbStore struct {
	cmd                *exec.Cmd
	dir, sock, logPath string
	port               int
	args               []string
	done               chan error
}

func mariadbd() string {
	for _, p := range []string{"mariadbd", "/usr/sbin/mariadbd", "mysqld", "/usr/sbin/mysqld"} {
		if q, err := exec.LookPath(p); err == nil {
			return q
		}
	}
	return ""
}

func startMariaDB(ctx context.Context, dir string, threads int, logf func(string, ...any)) (*mariadbStore, error) {
	bin := mariadbd()
	if bin == "" {
		if err := aptInstall("mariadb-server", logf); err != nil {
			return nil, err
		}
		if bin = mariadbd(); bin == "" {
			return nil, errors.New("mariadb: mariadbd not found after installing mariadb-server")
		}
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &mariadbStore{dir: dir, sock: filepath.Join(dir, "mysql.sock"), logPath: filepath.Join(dir, "server.log"), port: port, done: make(chan error, 1)}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	if err := giveTo("mysql", dir); err != nil {
		return nil, err
	}
	install := []string{"--no-defaults", "--datadir=" + data, "--auth-root-authentication-method=normal", "--skip-test-db"}
	if os.Geteuid() == 0 {
		install = append(install, "--user=mysql")
	}
	logf("mariadb: mariadb-install-db in %s", data)
	if err := run(exec.Command("mariadb-install-db", install...)); err != nil {
		return nil, err
	}
	s.args = []string{
		"--innodb-flush-log-at-trx-commit=1",
		"--skip-log-bin",
		"--innodb-doublewrite=1",
		"--innodb-flush-method=fsync",
		"--innodb-buffer-pool-size=1G",
		"--innodb-log-file-size=256M",
		fmt.Sprintf("--max-connections=%d", threads*2+20),
	}
	args := append([]string{"--no-defaults", "--datadir=" + data, "--socket=" + s.sock, fmt.Sprintf("--port=%d", port),
		"--bind-address=127.0.0.1", "--pid-file=" + filepath.Join(dir, "mariadb.pid"), "--log-error=" + s.logPath}, s.args...)
	if os.Geteuid() == 0 {
		args = append(args, "--user=mysql")
	}
	s.cmd = exec.Command(bin, args...)
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { s.done <- s.cmd.Wait() }()
	client := func(sql string) error {
		return run(exec.Command("mariadb", "--no-defaults", "-S", s.sock, "-uroot", "-e", sql))
	}
	if err := retry(ctx, "mariadb up", func() error {
		select {
		case err := <-s.done:
			s.done <- err
			return fmt.Errorf("mariadbd exited (%v); see %s", err, s.logPath)
		default:
		}
		return client("SELECT 1")
	}); err != nil {
		s.Close()
		return nil, err
	}
	if err := client("CREATE DATABASE ycsb; CREATE USER 'ycsb'@'127.0.0.1' IDENTIFIED BY 'ycsb'; GRANT ALL ON ycsb.* TO 'ycsb'@'127.0.0.1'"); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *mariadbStore) Binding() (string, map[string]string) {
	return "org.doppio.ycsb.MariaDBClient", map[string]string{
		"jdbc.url": fmt.Sprintf("jdbc:mariadb://127.0.0.1:%d/ycsb", s.port), "jdbc.user": "ycsb", "jdbc.password": "ycsb", "jdbc.create": "true"}
}

func (s *mariadbStore) Settings() string {
	return "private server (mariadb-install-db, `mariadbd --no-defaults`) over TCP loopback, MariaDB Connector/J, autocommit; table `usertable(ycsb_key varchar(255) PRIMARY KEY, doc JSON NOT NULL) ENGINE=InnoDB, utf8mb4_bin`; flags: `" +
		strings.Join(s.args, "`, `") + "` (binary log off: no replica to feed, so sync_binlog does not apply)"
}

func (s *mariadbStore) PprofAddr() string { return "" }

func (s *mariadbStore) Close() error {
	if s.cmd == nil || s.cmd.Process == nil {
		return nil
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(60 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	return nil
}

func mariadbVersion() string {
	bin := mariadbd()
	if bin == "" {
		return ""
	}
	out, _ := exec.Command(bin, "--version").Output()
	return strings.TrimSpace(string(out))
}

// jsonString is for the report's JSON file.
func jsonString(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}
