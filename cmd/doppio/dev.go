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
		nodes  int
		secure bool
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
			return runDevCluster(cmd, f, nodes)
		},
	}
	f.register(cmd, true)
	cmd.Flags().IntVar(&nodes, "nodes", 1, "number of node processes; above 1, etcd runs in this process and each node is a doppio start child (n1, n2, …)")
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
// loopback ports, their logs prefixed with their ids. A child that dies
// stays dead; its restart command is printed at start.
func runDevCluster(cmd *cobra.Command, f *nodeFlags, n int) error {
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
	etcd, err := embedetcd.StartSecure(ctx, filepath.Join(f.dataDir, "etcd"), certsDir, logger)
	if err != nil {
		return err
	}
	defer etcd.Close()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	endpoints := strings.Join(etcd.Endpoints(), ",")
	var children []*exec.Cmd
	var wg sync.WaitGroup
	out := &syncWriter{w: os.Stdout}
	fmt.Fprintf(out, "etcd: %s\n", endpoints)
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("n%d", i)
		// n1 listens on --http, so the CLI's default server reaches the
		// cluster; the others on free ports.
		httpAddr := f.httpAddr
		if i > 1 || strings.HasSuffix(httpAddr, ":0") {
			httpAddr = freeAddr()
		}
		args := append([]string{"start", "--id", id, "--data", filepath.Join(f.dataDir, id),
			"--http", httpAddr, "--grpc", freeAddr(), "--etcd", endpoints}, sharedNodeArgs(cmd)...)
		if certsDir != "" {
			args = append(args, "--certs-dir", certsDir)
		}
		if f.insecure {
			args = append(args, "--insecure")
		}
		if f.pprofAddr != "" {
			addr, err := nthPort(f.pprofAddr, i-1)
			if err != nil {
				return fmt.Errorf("--pprof: %w", err)
			}
			args = append(args, "--pprof", addr)
		}
		c := exec.Command(self, args...)
		stdout, _ := c.StdoutPipe()
		stderr, _ := c.StderrPipe()
		if err := c.Start(); err != nil {
			return err
		}
		children = append(children, c)
		for _, r := range []io.Reader{stdout, stderr} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				prefixLines(out, "["+id+"] ", r)
			}()
		}
		scheme := "http"
		if certsDir != "" {
			scheme = "https"
		}
		fmt.Fprintf(out, "node %s: %s://%s  (pid %d)\n  restart: %s %s\n", id, scheme, args[6], c.Process.Pid, self, strings.Join(args, " "))
		if i == 1 && certsDir != "" {
			go func(addr string) {
				if err := setDevRootPassword(ctx, "https://"+addr, certsDir, f.dataDir); err != nil {
					logger.Error("doppio dev --secure", "err", err)
					return
				}
				printConnect(out, certsDir, addr, f.dataDir)
			}(args[6])
		}
	}
	done := make(chan struct{})
	go func() {
		for _, c := range children {
			_ = c.Wait()
		}
		close(done)
	}()
	// SIGHUP reloads certificates: the children's; etcd re-reads its
	// files at each handshake.
	reloadOnHangup(ctx, logger, func() error {
		for _, c := range children {
			_ = c.Process.Signal(syscall.SIGHUP) // an exited child just refuses
		}
		return nil
	})
	select {
	case <-ctx.Done():
	case <-done:
	}
	logger.Info("stopping nodes")
	for _, c := range children {
		_ = c.Process.Signal(syscall.SIGTERM) // an exited child just refuses
	}
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		for _, c := range children {
			_ = c.Process.Kill()
		}
		<-done
	}
	wg.Wait()
	return nil
}

// freeAddr returns a loopback address with a port free right now.
func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "127.0.0.1:0"
	}
	defer l.Close()
	return l.Addr().String()
}

func prefixLines(w io.Writer, prefix string, r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fmt.Fprintln(w, prefix+sc.Text())
	}
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
var perNodeFlags = map[string]bool{"data": true, "http": true, "grpc": true, "etcd": true, "pprof": true, "nodes": true, "help": true, "secure": true, "insecure": true, printConfigFlag: true}

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
