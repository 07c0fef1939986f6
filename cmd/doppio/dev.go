package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/doppio-db/doppio/internal/certs"
	"github.com/doppio-db/doppio/internal/embedetcd"
	"github.com/doppio-db/doppio/internal/node"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func devCommand(common *clientFlags) *cobra.Command {
	f := &nodeFlags{common: common}
	var (
		nodes   int
		secure  bool
		restart bool
	)
	cmd := &cobra.Command{
		Use:         "dev",
		Annotations: map[string]string{serverCommand: "dev"},
		Short:       "Run Doppio locally: an embedded etcd and one node (or --nodes N node processes), data under one directory",
		Long: `Run Doppio locally: an embedded etcd and one node (or --nodes N node
processes), data under one directory (--data).

On loopback it runs insecure by default. --secure runs every link over TLS:
the first start creates DATA/certs with a CA, a node certificate for
localhost, 127.0.0.1 and ::1 and a client certificate for user root, and
prints how to connect (or give your own --certs-dir).`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if secure && f.common.certsDir == "" {
				f.common.certsDir = filepath.Join(f.dataDir, "certs")
				created, err := certs.EnsureDev(f.common.certsDir)
				if err != nil {
					return fmt.Errorf("--secure: %w", err)
				}
				if created {
					fmt.Fprintf(cmd.OutOrStdout(), "created a CA, a node certificate (%s) and a client certificate for %s in %s\n",
						strings.Join(certs.DevHosts, ", "), certs.DevUser, f.common.certsDir)
				}
			}
			if nodes <= 1 {
				logger, err := f.log.logger()
				if err != nil {
					return err
				}
				cfg, err := f.config(logger)
				if err != nil {
					return err
				}
				if cfg.CertsDir != "" {
					cfg.Opened = func(n *node.Node) {
						go func() {
							if err := setDevRootPassword(cmd.Context(), "https://"+n.Addr(), cfg.CertsDir, f.dataDir); err != nil {
								logger.Error("doppio dev --secure", "err", err)
								return
							}
							printConnect(cmd.OutOrStdout(), cfg.CertsDir, n.Addr(), f.dataDir)
						}()
					}
				}
				return runNode(cmd, cfg)
			}
			return runDevCluster(cmd, f, nodes, restart)
		},
	}
	f.register(cmd, true)
	cmd.Flags().IntVar(&nodes, "nodes", 1, "number of node processes; above 1, etcd runs in this process and each node is a doppio start child (n1, n2, …)")
	cmd.Flags().BoolVar(&restart, "restart-on-exit", false, "with --nodes above 1: start a node that exits again after a second (without it, its restart command is printed)")
	cmd.Flags().BoolVar(&secure, "secure", false, "TLS on every link, with certificates made in DATA/certs on first start (unless --certs-dir names others)")
	return cmd
}

// printConnect tells how to reach a secure dev cluster at addr, once
// root's password is set.
func printConnect(w io.Writer, dir, addr, data string) {
	abs, err := filepath.Abs(dir)
	if err == nil {
		dir = abs
	}
	if abs, err := filepath.Abs(data); err == nil {
		data = abs
	}
	pwFile := filepath.Join(data, rootPasswordFile)
	url := "https://" + addr
	crt, key := filepath.Join(dir, certs.ClientCertFile(certs.DevUser)), filepath.Join(dir, certs.ClientKeyFile(certs.DevUser))
	fmt.Fprintf(w, `
Secure: TLS on every link; certificates in %[1]s.
Connect as %[5]s with the CLI:
  doppio --certs-dir %[1]s --server %[2]s cluster
or with environment variables:
  export DOPPIO_CERTS_DIR=%[1]s DOPPIO_SERVER=%[2]s
or with curl:
  curl --cacert %[6]s --cert %[3]s --key %[4]s %[2]s/_cluster
%[5]s's password is in %[7]s (HTTP Basic, or a session token):
  doppio --certs-dir %[1]s --server %[2]s --user %[5]s --password "$(cat %[7]s)" login
  curl --cacert %[6]s -u %[5]s:"$(cat %[7]s)" %[2]s/_cluster

`, dir, url, crt, key, certs.DevUser, filepath.Join(dir, certs.CAFile), pwFile)
}

// runDevCluster runs an embedded etcd here and n `doppio start` children on
// loopback ports, their logs prefixed with their ids. It fails whole: a
// child that exits before every node is ready stops the others and ends
// the command with an error. Later, a child that exits is reported with
// its restart command and, with restart, started again.
func runDevCluster(cmd *cobra.Command, f *nodeFlags, n int, restart bool) error {
	logger, err := f.log.logger()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	certsDir := f.common.certsDir
	if certsDir == "" {
		// As `doppio start` would: only loopback listens run insecure
		// unless --insecure says otherwise.
		if err := node.CheckInsecure(f.insecure, logger, f.httpAddr); err != nil {
			return err
		}
	}
	// n1 listens on --http, so the CLI's default server reaches the
	// cluster: a taken port must stop everything before it starts.
	if !strings.HasSuffix(f.httpAddr, ":0") {
		l, err := net.Listen("tcp", f.httpAddr)
		if err != nil {
			return fmt.Errorf("--http %s is taken (another doppio, or make run?): stop it or choose another address: %w", f.httpAddr, err)
		}
		l.Close()
	}
	etcd, err := embedetcd.StartSecure(ctx, filepath.Join(f.dataDir, "etcd"), certsDir, logger)
	if err != nil {
		return err
	}
	defer etcd.Close()
	self, err := devBinary(f.dataDir)
	if err != nil {
		return err
	}
	endpoints := strings.Join(etcd.Endpoints(), ",")
	out := &syncWriter{w: cmd.OutOrStdout()}
	fmt.Fprintf(out, "etcd: %s\n", endpoints)
	scheme := "http"
	if certsDir != "" {
		scheme = "https"
	}
	exits := make(chan *devChild, n)
	ready := make(chan *devChild, n)
	var children []*devChild
	stopAll := func() {
		logger.Info("stopping nodes")
		for _, c := range children {
			c.stop()
		}
	}
	// Every node's ports are chosen at once: a port picked and released
	// while an earlier node has not yet bound its own may be that port.
	addrs, err := freeAddrs(2 * n)
	if err != nil {
		return err
	}
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("n%d", i)
		httpAddr, grpcAddr := f.httpAddr, addrs[2*(i-1)+1]
		if i > 1 || strings.HasSuffix(httpAddr, ":0") {
			httpAddr = addrs[2*(i-1)]
		}
		args := append([]string{"start", "--id", id, "--data", filepath.Join(f.dataDir, id),
			"--http", httpAddr, "--grpc", grpcAddr, "--etcd", endpoints}, sharedNodeArgs(cmd)...)
		if certsDir != "" {
			args = append(args, "--certs-dir", certsDir)
		}
		if f.insecure {
			args = append(args, "--insecure")
		}
		if f.pprofAddr != "" {
			addr, err := nthPort(f.pprofAddr, i-1)
			if err != nil {
				stopAll()
				return fmt.Errorf("--pprof: %w", err)
			}
			args = append(args, "--pprof", addr)
		}
		c := &devChild{id: id, bin: self, args: args, out: out}
		if err := c.start(ready, exits); err != nil {
			stopAll()
			return err
		}
		children = append(children, c)
		fmt.Fprintf(out, "node %s: %s://%s  (pid %d)\n  restart: %s\n", id, scheme, httpAddr, c.pid(), c.commandLine())
		if i == 1 && certsDir != "" {
			go func(addr string) {
				if err := setDevRootPassword(ctx, "https://"+addr, certsDir, f.dataDir); err != nil {
					logger.Error("doppio dev --secure", "err", err)
					return
				}
				printConnect(out, certsDir, addr, f.dataDir)
			}(httpAddr)
		}
	}
	// SIGHUP reloads certificates: the children's; etcd re-reads its
	// files at each handshake.
	reloadOnHangup(ctx, logger, func() error {
		for _, c := range children {
			c.signal(syscall.SIGHUP)
		}
		return nil
	})
	for waiting := n; waiting > 0; {
		select {
		case <-ready:
			waiting--
		case c := <-exits:
			stopAll()
			return fmt.Errorf("node %s exited while the cluster started (%v), so every node was stopped; its last words: %s", c.id, c.err, c.lastLine())
		case <-ctx.Done():
			stopAll()
			return nil
		}
	}
	fmt.Fprintf(out, "all %d nodes ready\n", n)
	for {
		select {
		case <-ctx.Done():
			stopAll()
			return nil
		case c := <-exits:
			if !restart {
				fmt.Fprintf(out, "node %s exited (%v); restart it with:\n  %s\n", c.id, c.err, c.commandLine())
				continue
			}
			fmt.Fprintf(out, "node %s exited (%v); restarting it (--restart-on-exit)\n", c.id, c.err)
			select {
			case <-ctx.Done():
				continue
			case <-time.After(time.Second):
			}
			if err := c.start(ready, exits); err != nil {
				fmt.Fprintf(out, "node %s: restart failed: %v\n", c.id, err)
				continue
			}
			fmt.Fprintf(out, "node %s restarted (pid %d)\n", c.id, c.pid())
		}
	}
}

// devChild is one `doppio start` process of a dev cluster.
type devChild struct {
	id, bin string
	args    []string
	out     io.Writer

	mu   sync.Mutex
	cmd  *exec.Cmd
	last string        // its last log line
	err  error         // how it exited, once done is closed
	done chan struct{} // closed once it has exited and been reaped
}

// start runs the child; ready gets it once it logs that it serves,
// exits once it has exited (and been reaped, so no zombie stays).
func (c *devChild) start(ready, exits chan<- *devChild) error {
	cmd := exec.Command(c.bin, c.args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("node %s: %w", c.id, err)
	}
	done := make(chan struct{})
	c.mu.Lock()
	c.cmd, c.done, c.last = cmd, done, ""
	c.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		prefixLines(c.out, "["+c.id+"] ", stdout, nil)
	}()
	go func() {
		defer wg.Done()
		prefixLines(c.out, "["+c.id+"] ", stderr, func(line string) {
			c.mu.Lock()
			c.last = line
			c.mu.Unlock()
			if strings.Contains(line, "doppio node ready") {
				select {
				case ready <- c:
				default:
				}
			}
		})
	}()
	go func() {
		wg.Wait() // the pipes are read to their end before Wait closes them
		err := cmd.Wait()
		c.mu.Lock()
		c.err = err
		c.mu.Unlock()
		close(done)
		select {
		case exits <- c:
		default: // the cluster is stopping; nobody reads any more
		}
	}()
	return nil
}

func (c *devChild) pid() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cmd.Process.Pid
}

func (c *devChild) lastLine() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

// commandLine is the shell command that starts the child again.
func (c *devChild) commandLine() string {
	words := []string{shellQuote(c.bin)}
	for _, a := range c.args {
		words = append(words, shellQuote(a))
	}
	return strings.Join(words, " ")
}

// shellQuote is s as one word of a POSIX shell command: as is when plain,
// else single-quoted (an empty value, such as --audit-log's, becomes a
// pair of quotes).
func shellQuote(s string) string {
	plain := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("@%+=:,./_-", r)) {
			plain = false
		}
	}
	if plain {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// signal sends sig to the child if it runs.
func (c *devChild) signal(sig os.Signal) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = c.cmd.Process.Signal(sig) // an exited child just refuses
}

// stop sends SIGTERM and waits for the child to exit, killing it after
// 15 s.
func (c *devChild) stop() {
	c.signal(syscall.SIGTERM)
	c.mu.Lock()
	done := c.done
	c.mu.Unlock()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		c.signal(syscall.SIGKILL)
		<-done
	}
}

// devBinary is the binary a dev cluster's nodes run: this one, or under
// `go run`, whose binary vanishes when it exits, a copy in DATA/bin, so
// the printed restart commands keep working.
func devBinary(dataDir string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	if !strings.Contains(self, string(filepath.Separator)+"go-build") {
		return self, nil
	}
	dir, err := filepath.Abs(filepath.Join(dataDir, "bin"))
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	src, err := os.Open(self)
	if err != nil {
		return "", err
	}
	defer src.Close()
	tmp, err := os.CreateTemp(dir, ".doppio-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, src); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	// A rename replaces a copy a running node may still execute.
	dst := filepath.Join(dir, "doppio")
	return dst, os.Rename(tmp.Name(), dst)
}

// freeAddrs returns k loopback addresses, each with a different port free
// right now: all are held open until the last is chosen, so the kernel
// cannot hand one port out twice.
func freeAddrs(k int) ([]string, error) {
	addrs := make([]string, 0, k)
	for range k {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("choosing the dev cluster's ports: %w", err)
		}
		defer l.Close()
		addrs = append(addrs, l.Addr().String())
	}
	return addrs, nil
}

// prefixLines copies r's lines to w behind prefix, showing each to
// seen (when not nil) too.
func prefixLines(w io.Writer, prefix string, r io.Reader, seen func(string)) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if seen != nil {
			seen(sc.Text())
		}
		fmt.Fprintln(w, prefix+sc.Text())
	}
	_, _ = io.Copy(io.Discard, r) // a line too long ends the scan, not the child
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// nthPort is addr with its port moved up by k: node i of a dev cluster
// serves pprof on the --pprof port plus i-1.
func nthPort(addr string, k int) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	n, err := strconv.Atoi(port)
	if err != nil || n == 0 {
		return "", fmt.Errorf("%q: a dev cluster needs a fixed port (node i listens on port+i-1)", addr)
	}
	return net.JoinHostPort(host, strconv.Itoa(n+k)), nil
}

// perNodeFlags are the dev flags each node of a dev cluster gets its own
// value of (or that are dev's alone); every other node flag reaches every
// node as given.
var perNodeFlags = map[string]bool{"data": true, "http": true, "grpc": true, "etcd": true, "pprof": true, "nodes": true, "help": true, "secure": true, "insecure": true, printConfigFlag: true, "restart-on-exit": true}

// sharedNodeArgs passes dev's node flags (nodeFlags.register, shared with
// start) on to each `doppio start` child, so a flag added there reaches a
// dev cluster without being listed here.
func sharedNodeArgs(cmd *cobra.Command) []string {
	var args []string
	cmd.LocalNonPersistentFlags().VisitAll(func(fl *pflag.Flag) {
		if !perNodeFlags[fl.Name] {
			args = append(args, "--"+fl.Name, fl.Value.String())
		}
	})
	return args
}
