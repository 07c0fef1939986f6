package torture

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/doppio-db/doppio/internal/redistest"
	"github.com/doppio-db/doppio/internal/testport"
)

// Ports every node listens on, each at its own address.
const (
	httpPort       = 8080
	grpcPort       = 9090
	etcdPeerPort   = 2380
	etcdClientPort = 2379
	// etcdMembers is how many nodes embed an etcd member; the others (in a
	// five-node cluster) point at them.
	etcdMembers = 3
)

// Cluster is 3 or 5 `doppio start` processes, one per namespace of a
// Network, each with its own data directory and log file. Nodes 1–3 embed
// the etcd members; nodes 4 and 5 use them.
//
// An insecure cluster (StartCluster) speaks plaintext everywhere and
// authenticates no one. A secure one (StartSecureCluster) runs in secure
// mode: TLS on every link (REST, node to node, etcd) and authentication,
// with certificates made for it under Dir/certs; the harness and the
// workloads act as root, by root's client certificate.
type Cluster struct {
	Net    *Network
	Binary string
	Dir    string // data/, logs/ (and certs/ when secure) of every node
	Nodes  []*Node
	// Extra flags for every node, e.g. --raft-tick.
	Extra []string
	// Redis is the cache tier's Redis, on the bridge's address (outside
	// every fault), which every node is started with (--cache-redis).
	Redis *redistest.Server

	certs *clusterCerts // nil when insecure
	// client acts as root in secure mode; nodeClient presents the node
	// certificate (routes for nodes only, etcd). Both are one in plaintext.
	client, nodeClient *http.Client
}

// Node is one node process; it keeps its id, addresses and data across
// restarts.
type Node struct {
	Index int // from 0
	ID    string
	IP    string

	c      *Cluster
	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{} // closed once the process has been reaped
	paused bool
}

// Node states as a nemesis sees them.
const (
	Running = "running"
	Paused  = "paused"
	Down    = "down"
)

// StartCluster starts n insecure nodes in fresh namespaces with data
// under dir and waits until every node is ready. On error everything
// started is torn down again.
func StartCluster(ctx context.Context, binary, dir string, n int, extra ...string) (*Cluster, error) {
	return startCluster(ctx, binary, dir, n, false, extra)
}

// StartSecureCluster is StartCluster in secure mode: it first makes a CA,
// a node certificate naming every node's address and root's client
// certificate under dir/certs, and starts the nodes with --certs-dir.
func StartSecureCluster(ctx context.Context, binary, dir string, n int, extra ...string) (*Cluster, error) {
	return startCluster(ctx, binary, dir, n, true, extra)
}

func startCluster(ctx context.Context, binary, dir string, n int, secure bool, extra []string) (*Cluster, error) {
	if n != 3 && n != 5 {
		return nil, fmt.Errorf("a cluster has 3 or 5 nodes, not %d", n)
	}
	nw, err := NewNetwork(n)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Net: nw, Binary: binary, Dir: dir, Extra: extra,
		client: &http.Client{Timeout: 3 * time.Second}}
	c.nodeClient = c.client
	for i := range n {
		c.Nodes = append(c.Nodes, &Node{Index: i, ID: fmt.Sprintf("n%d", i+1), IP: nw.IP(i), c: c})
	}
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		c.Close()
		return nil, err
	}
	if c.Redis, err = startRedis(nw, filepath.Join(dir, "redis")); err != nil {
		c.Close()
		return nil, err
	}
	if secure {
		ips := make([]string, n)
		for i, nd := range c.Nodes {
			ips[i] = nd.IP
		}
		if c.certs, err = makeCerts(filepath.Join(dir, "certs"), ips); err != nil {
			c.Close()
			return nil, err
		}
		c.client = &http.Client{Timeout: 3 * time.Second, Transport: newTransport(c.certs.user)}
		c.nodeClient = &http.Client{Timeout: 3 * time.Second, Transport: newTransport(c.certs.node)}
	}
	if err := c.StartAll(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Endpoints implements Target: every node's REST base URL.
func (c *Cluster) Endpoints() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.URL()
	}
	return out
}

// TLS implements Target: nil when insecure, else root's client
// configuration.
func (c *Cluster) TLS() *tls.Config {
	if c.certs == nil {
		return nil
	}
	return c.certs.user
}

// Secure reports whether the cluster runs in secure mode.
func (c *Cluster) Secure() bool { return c.certs != nil }

// scheme is the scheme of every URL the cluster serves.
func (c *Cluster) scheme() string {
	if c.certs != nil {
		return "https"
	}
	return "http"
}

// URL is the node's REST base URL.
func (n *Node) URL() string { return fmt.Sprintf("%s://%s:%d", n.c.scheme(), n.IP, httpPort) }

// PeerURL is the base URL of the node's peer listener (its --grpc port),
// the only place it serves the node-only /_internal routes.
func (n *Node) PeerURL() string { return fmt.Sprintf("%s://%s:%d", n.c.scheme(), n.IP, grpcPort) }

// LogPath is the file the node's output goes to, across restarts.
func (n *Node) LogPath() string { return filepath.Join(n.c.Dir, "logs", n.ID+".log") }

func (n *Node) args() []string {
	c := n.c
	args := []string{"start", "--id", n.ID, "--zone", "z" + n.ID[1:],
		"--data", filepath.Join(c.Dir, "data", n.ID),
		"--http", fmt.Sprintf("%s:%d", n.IP, httpPort),
		"--grpc", fmt.Sprintf("%s:%d", n.IP, grpcPort)}
	if c.certs != nil {
		args = append(args, "--certs-dir", c.certs.dir)
	} else {
		// The nodes listen on their namespace's address, which is not
		// loopback: plaintext there must be asked for.
		args = append(args, "--insecure")
	}
	scheme := c.scheme()
	var members, clients []string
	for _, m := range c.Nodes[:etcdMembers] {
		members = append(members, fmt.Sprintf("%s=%s://%s:%d", m.ID, scheme, m.IP, etcdPeerPort))
		clients = append(clients, fmt.Sprintf("%s://%s:%d", scheme, m.IP, etcdClientPort))
	}
	if n.Index < etcdMembers {
		args = append(args, "--embed-etcd",
			"--etcd-peer", fmt.Sprintf("%s://%s:%d", scheme, n.IP, etcdPeerPort),
			"--etcd-client", fmt.Sprintf("%s://%s:%d", scheme, n.IP, etcdClientPort),
			"--initial-cluster", strings.Join(members, ","))
	} else {
		args = append(args, "--etcd", strings.Join(clients, ","))
	}
	if c.Redis != nil {
		args = append(args, "--cache-redis", c.Redis.Addr, "--cache-local-bytes", "8MB")
	}
	return append(args, c.Extra...)
}

// startRedis runs a Redis without persistence on the bridge's address,
// installing redis-server first when the machine lacks it.
func startRedis(nw *Network, dir string) (*redistest.Server, error) {
	bin, err := redistest.Binary()
	if err != nil {
		return nil, err
	}
	addr, err := testport.Free(nw.HostIP())
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return redistest.Run(bin, addr, dir, "")
}

// CacheRedis is the address of the cache tier's Redis, for the
// workloads that check it.
func (c *Cluster) CacheRedis() []string {
	if c.Redis == nil {
		return nil
	}
	return []string{c.Redis.Addr}
}

// Start starts the node's process (it must be down) without waiting.
func (n *Node) Start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		select {
		case <-n.done:
		default:
			return fmt.Errorf("%s is already running", n.ID)
		}
	}
	logf, err := os.OpenFile(n.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "\n=== torture: %s start %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(n.args(), " "))
	// `ip netns exec` execs the binary in place: the pid is doppio's own,
	// so SIGKILL and SIGSTOP reach it directly.
	cmd := exec.Command("ip", append([]string{"netns", "exec", n.c.Net.Namespace(n.Index), n.c.Binary}, n.args()...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// A node never outlives the harness (an interrupted test, a killed
	// `make torture`); CleanStale removes its namespace on the next run.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	n.cmd, n.done, n.paused = cmd, done, false
	return nil
}

// State is Running, Paused or Down.
func (n *Node) State() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return Down
	}
	select {
	case <-n.done:
		return Down
	default:
	}
	if n.paused {
		return Paused
	}
	return Running
}

// Kill sends SIGKILL and waits until the process is gone.
func (n *Node) Kill() {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
	n.mu.Lock()
	n.paused = false
	n.mu.Unlock()
}

// Stop sends SIGTERM (a graceful stop: the node hands its leaderships
// over and drains its clients) and waits until the process is gone,
// killing it if it has not exited within 30 s.
func (n *Node) Stop() error {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil {
		return fmt.Errorf("%s is not running", n.ID)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("%s: %v", n.ID, err)
	}
	select {
	case <-done:
		return nil
	case <-time.After(30 * time.Second):
		n.Kill()
		return fmt.Errorf("%s did not exit within 30 s of SIGTERM; killed", n.ID)
	}
}

// Pause stops the process with SIGSTOP; Resume continues it.
func (n *Node) Pause() error  { return n.signal(syscall.SIGSTOP, true) }
func (n *Node) Resume() error { return n.signal(syscall.SIGCONT, false) }

func (n *Node) signal(sig syscall.Signal, paused bool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return fmt.Errorf("%s is not running", n.ID)
	}
	if err := n.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("%s: %v", n.ID, err)
	}
	n.paused = paused
	return nil
}

// WaitReady polls /readyz until the node answers 200, its process exits,
// or ctx ends.
func (n *Node) WaitReady(ctx context.Context) error {
	n.mu.Lock()
	done := n.done
	n.mu.Unlock()
	for {
		if done == nil {
			return fmt.Errorf("%s was never started", n.ID)
		}
		if code, _, err := n.c.get(ctx, n, "/readyz"); err == nil && code == http.StatusOK {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("%s exited before it was ready; log %s:\n%s", n.ID, n.LogPath(), tailFile(n.LogPath(), 20))
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w; log %s:\n%s", n.ID, ctx.Err(), n.LogPath(), tailFile(n.LogPath(), 20))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Restart starts a down node and waits until it is ready.
func (n *Node) Restart(ctx context.Context) error {
	if err := n.Start(); err != nil {
		return err
	}
	return n.WaitReady(ctx)
}

// StartAll starts every down node at once (embedded etcd serves only once
// a majority of its members is up) and waits until all are ready.
func (c *Cluster) StartAll(ctx context.Context) error {
	for _, n := range c.Nodes {
		if n.State() == Down {
			if err := n.Start(); err != nil {
				return err
			}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	errs := make([]error, len(c.Nodes))
	var wg sync.WaitGroup
	for i, n := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = n.WaitReady(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// KillAll sends SIGKILL to every node at once.
func (c *Cluster) KillAll() {
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		wg.Add(1)
		go func() { defer wg.Done(); n.Kill() }()
	}
	wg.Wait()
}

// HealAll undoes every fault: network cuts and shaping go, paused nodes
// continue, down nodes start; it waits until every node is ready.
func (c *Cluster) HealAll(ctx context.Context) error {
	errs := []error{c.Net.Heal()}
	for _, n := range c.Nodes {
		if n.State() == Paused {
			errs = append(errs, n.Resume())
		}
	}
	errs = append(errs, c.StartAll(ctx))
	return errors.Join(errs...)
}

// Close kills every node and deletes the network. The data and logs stay
// under Dir.
func (c *Cluster) Close() error {
	for _, n := range c.Nodes {
		if n.State() == Paused {
			_ = n.Resume()
		}
	}
	c.KillAll()
	if c.Redis != nil {
		c.Redis.Kill()
	}
	return c.Net.Close()
}

func (c *Cluster) get(ctx context.Context, n *Node, path string) (int, []byte, error) {
	return c.send(ctx, http.MethodGet, n, path)
}

// post sends a POST without a body to node n.
func (c *Cluster) post(ctx context.Context, n *Node, path string) (int, []byte, error) {
	return c.send(ctx, http.MethodPost, n, path)
}

func (c *Cluster) send(ctx context.Context, method string, n *Node, path string) (int, []byte, error) {
	return c.sendWith(ctx, c.client, method, n.URL()+path)
}

// getInternal sends a GET for a route for nodes only to node n's peer
// listener, as a node (in secure mode its mutual TLS admits only a node
// certificate).
func (c *Cluster) getInternal(ctx context.Context, n *Node, path string) (int, []byte, error) {
	return c.sendWith(ctx, c.nodeClient, http.MethodGet, n.PeerURL()+path)
}

func (c *Cluster) sendWith(ctx context.Context, hc *http.Client, method, u string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// Status is the part of GET /_cluster the suite reads.
type Status struct {
	Controller string `json:"controller"`
	Nodes      []struct {
		ID    string `json:"id"`
		State string `json:"state"`
		Leads int    `json:"leads"`
	} `json:"nodes"`
	Partitions []struct {
		Database  string   `json:"database"`
		Partition int      `json:"partition"`
		Leader    string   `json:"leader"`
		Term      uint64   `json:"term"`
		Replicas  []string `json:"replicas"`
		SCN       string   `json:"scn"`
		Members   []struct {
			Node string  `json:"node"`
			Role string  `json:"role"`
			Lag  *uint64 `json:"lag"`
		} `json:"members"`
	} `json:"partitions"`
}

// Status asks the running nodes, in order, for GET /_cluster and returns
// the first answer.
func (c *Cluster) Status(ctx context.Context) (Status, error) {
	var errs []error
	for _, n := range c.Nodes {
		if n.State() != Running {
			continue
		}
		code, b, err := c.get(ctx, n, "/_cluster")
		if err != nil || code != http.StatusOK {
			errs = append(errs, fmt.Errorf("%s: GET /_cluster: %d %v", n.ID, code, err))
			continue
		}
		var st Status
		if err := json.Unmarshal(b, &st); err != nil {
			return st, fmt.Errorf("%s: GET /_cluster: %w", n.ID, err)
		}
		return st, nil
	}
	return Status{}, fmt.Errorf("no node answered /_cluster: %w", errors.Join(errs...))
}

// Node returns the node with id, or nil.
func (c *Cluster) Node(id string) *Node {
	for _, n := range c.Nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// Leaders lists the nodes leading partitions, the one leading most first.
func (c *Cluster) Leaders(ctx context.Context) ([]*Node, error) {
	st, err := c.Status(ctx)
	if err != nil {
		return nil, err
	}
	count := map[string]int{}
	for _, p := range st.Partitions {
		if p.Leader != "" {
			count[p.Leader]++
		}
	}
	var out []*Node
	for id := range count {
		if n := c.Node(id); n != nil {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if count[out[i].ID] != count[out[j].ID] {
			return count[out[i].ID] > count[out[j].ID]
		}
		return out[i].ID < out[j].ID
	})
	if len(out) == 0 {
		return nil, errors.New("no partition has a known leader")
	}
	return out, nil
}

// Controller is the node running the active placement controller.
func (c *Cluster) Controller(ctx context.Context) (*Node, error) {
	st, err := c.Status(ctx)
	if err != nil {
		return nil, err
	}
	if n := c.Node(st.Controller); n != nil {
		return n, nil
	}
	return nil, fmt.Errorf("no active controller (/_cluster says %q)", st.Controller)
}

// EtcdLeader is the node whose embedded etcd member leads the etcd
// cluster, asked over etcd's gRPC API as a node asks (in secure mode the
// client port admits node certificates only).
func (c *Cluster) EtcdLeader(ctx context.Context) (*Node, error) {
	var nodeTLS *tls.Config
	if c.certs != nil {
		nodeTLS = c.certs.node
	}
	var errs []error
	for _, n := range c.Nodes[:etcdMembers] {
		if n.State() != Running {
			continue
		}
		leader, self, err := etcdStatus(ctx, fmt.Sprintf("%s://%s:%d", c.scheme(), n.IP, etcdClientPort), nodeTLS)
		if err != nil || leader == 0 {
			errs = append(errs, fmt.Errorf("%s: etcd status: leader %d, %v", n.ID, leader, err))
			continue
		}
		if leader == self {
			return n, nil
		}
	}
	return nil, fmt.Errorf("no etcd member says it leads: %w", errors.Join(errs...))
}

// etcdStatus asks the etcd member at endpoint which member leads, and
// which member it is.
func etcdStatus(ctx context.Context, endpoint string, tlsConf *tls.Config) (leader, self uint64, err error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 3 * time.Second, TLS: tlsConf, Logger: zap.NewNop()})
	if err != nil {
		return 0, 0, err
	}
	defer cli.Close()
	sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	st, err := cli.Status(sctx, endpoint)
	if err != nil {
		return 0, 0, err
	}
	return st.Leader, st.Header.GetMemberId(), nil
}

// Settle waits until every node is ready and, as every node sees it, every
// partition has a leader whose replicas all follow it with no lag: the
// state in which a checker may read final values. It returns how long
// that took, or an error describing what was still unsettled when ctx
// ended.
func (c *Cluster) Settle(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	var last string
	// Settled means settled three times in a row, a quarter second apart: a
	// healed node with a higher term may still depose a leader.
	calm := 0
	for {
		last = c.unsettled(ctx)
		if last != "" {
			calm = 0
		} else if calm++; calm == 3 {
			return time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			return time.Since(start), fmt.Errorf("cluster not settled after %v: %s", time.Since(start).Round(time.Millisecond), last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (c *Cluster) unsettled(ctx context.Context) string {
	type replica struct {
		Database  string `json:"database"`
		Partition int    `json:"partition"`
		Role      string `json:"role"`
		Leader    string `json:"leader"`
		Term      uint64 `json:"term"`
		Followers map[string]struct {
			Lag uint64 `json:"lag"`
		} `json:"followers"`
	}
	type partition struct {
		db string
		p  int
	}
	// Every replica of every partition, as the node hosting it reports it.
	seen := map[partition][]replica{}
	hostedBy := map[partition][]string{}
	for _, n := range c.Nodes {
		if n.State() != Running {
			return n.ID + " is " + n.State()
		}
		if code, _, err := c.get(ctx, n, "/readyz"); err != nil || code != http.StatusOK {
			return fmt.Sprintf("%s not ready (%d %v)", n.ID, code, err)
		}
		code, b, err := c.getInternal(ctx, n, "/_internal/replicas")
		if err != nil || code != http.StatusOK {
			return fmt.Sprintf("%s: GET /_internal/replicas: %d %v", n.ID, code, err)
		}
		var local struct {
			Replicas []replica `json:"replicas"`
		}
		if err := json.Unmarshal(b, &local); err != nil {
			return fmt.Sprintf("%s: GET /_internal/replicas: %v", n.ID, err)
		}
		for _, r := range local.Replicas {
			k := partition{r.Database, r.Partition}
			seen[k] = append(seen[k], r)
			hostedBy[k] = append(hostedBy[k], n.ID)
		}
	}
	st, err := c.Status(ctx)
	if err != nil {
		return err.Error()
	}
	for _, p := range st.Partitions {
		k := partition{p.Database, p.Partition}
		reps := seen[k]
		if len(reps) < len(p.Replicas) {
			return fmt.Sprintf("%s/%d is placed on %v but hosted on %v", p.Database, p.Partition, p.Replicas, hostedBy[k])
		}
		leaders := 0
		for i, r := range reps {
			if r.Leader == "" || r.Leader != reps[0].Leader || r.Term != reps[0].Term {
				return fmt.Sprintf("%s/%d: replicas disagree on the leader (%s says %q in term %d, %s says %q in term %d)",
					p.Database, p.Partition, hostedBy[k][0], reps[0].Leader, reps[0].Term, hostedBy[k][i], r.Leader, r.Term)
			}
			if r.Role == "leader" {
				leaders++
				for f, fr := range r.Followers {
					if fr.Lag > 0 {
						return fmt.Sprintf("%s/%d: %s lags %d entries", p.Database, p.Partition, f, fr.Lag)
					}
				}
			} else if r.Role != "follower" {
				return fmt.Sprintf("%s/%d: %s is %s", p.Database, p.Partition, hostedBy[k][i], r.Role)
			}
		}
		if leaders != 1 {
			return fmt.Sprintf("%s/%d has %d replicas calling themselves leader", p.Database, p.Partition, leaders)
		}
	}
	return ""
}

// tailFile returns the last n lines of a file.
func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
