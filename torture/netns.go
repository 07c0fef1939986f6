package torture

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// namePrefix starts the name of every namespace, veth and bridge the suite
// creates, followed by the creating process's id in base 36: a later run
// deletes what a dead process left behind and nothing of a live one.
const namePrefix = "dpt"

// Network is one run's private network: a namespace per node, each joined
// to a bridge in the root namespace by a veth pair, all in one /24. The
// bridge holds the subnet's .254, so the test process reaches every node
// through it; faults cut node-to-node paths with blackhole routes inside
// the namespaces and shape a node's link with a qdisc on both ends.
type Network struct {
	tag    string // namePrefix + pid in base 36 + "-"
	bridge string
	subnet string // "10.77.S"
	nodes  int
	// Netem reports whether the kernel has sch_netem; without it loss is a
	// flapping blackhole and delay is a token-bucket bandwidth limit.
	Netem bool

	mu      sync.Mutex
	cuts    map[[2]int]bool // a blackhole route in a's namespace towards b
	shaped  map[int]bool
	flapper map[int]chan struct{}
}

// ip runs `ip args...` (in namespace ns unless it is "").
func ip(ns string, args ...string) error {
	if ns != "" {
		args = append([]string{"netns", "exec", ns, "ip"}, args...)
	}
	return run("ip", args...)
}

func run(name string, args ...string) error {
	var out bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

func output(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// CanCreateNetworks says why this process cannot build a Network, or nil.
func CanCreateNetworks() error {
	if os.Geteuid() != 0 {
		return errors.New("the fault suite needs root to create network namespaces (run as root, or set DOPPIO_TORTURE=off to skip it)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("the fault suite needs iproute2's `ip` on PATH (or set DOPPIO_TORTURE=off to skip it)")
	}
	return nil
}

// NewNetwork builds namespaces for n nodes, deleting first what dead runs
// left behind.
func NewNetwork(n int) (*Network, error) {
	if err := CanCreateNetworks(); err != nil {
		return nil, err
	}
	CleanStale()
	w := &Network{
		tag:     namePrefix + strconv.FormatInt(int64(os.Getpid()), 36) + "-",
		nodes:   n,
		cuts:    map[[2]int]bool{},
		shaped:  map[int]bool{},
		flapper: map[int]chan struct{}{},
	}
	// Several runs (several engineers' tests) may share the machine: take a
	// /24 no bridge uses yet.
	subnetMu.Lock()
	defer subnetMu.Unlock()
	addrs, err := output("ip", "-4", "-o", "addr", "show")
	if err != nil {
		return nil, err
	}
	for i := range 250 {
		s := fmt.Sprintf("10.77.%d", (os.Getpid()+i)%250+1)
		if !strings.Contains(addrs, " "+s+".") {
			w.subnet = s
			break
		}
	}
	if w.subnet == "" {
		return nil, errors.New("no free 10.77.x.0/24 subnet for the fault suite's bridge")
	}
	if err := w.build(); err != nil {
		w.Close()
		return nil, fmt.Errorf("create network namespaces: %w", err)
	}
	w.Netem = run("tc", "qdisc", "add", "dev", w.hostVeth(0), "root", "netem", "delay", "1ms") == nil
	if w.Netem {
		_ = run("tc", "qdisc", "del", "dev", w.hostVeth(0), "root")
	}
	return w, nil
}

// subnetMu keeps two networks of one process from picking the same subnet.
var subnetMu sync.Mutex

func (w *Network) build() error {
	w.bridge = w.tag + "br"
	if err := ip("", "link", "add", w.bridge, "type", "bridge"); err != nil {
		return err
	}
	if err := ip("", "addr", "add", w.subnet+".254/24", "dev", w.bridge); err != nil {
		return err
	}
	if err := ip("", "link", "set", w.bridge, "up"); err != nil {
		return err
	}
	for i := range w.nodes {
		ns, host, peer := w.Namespace(i), w.hostVeth(i), w.tag+"p"+strconv.Itoa(i)
		steps := [][]string{
			{"", "netns", "add", ns},
			{"", "link", "add", host, "type", "veth", "peer", "name", peer},
			{"", "link", "set", peer, "netns", ns},
			{"", "link", "set", host, "master", w.bridge},
			{"", "link", "set", host, "up"},
			{ns, "link", "set", peer, "name", "eth0"},
			{ns, "addr", "add", w.IP(i) + "/24", "dev", "eth0"},
			{ns, "link", "set", "eth0", "up"},
			{ns, "link", "set", "lo", "up"},
		}
		for _, s := range steps {
			if err := ip(s[0], s[1:]...); err != nil {
				return err
			}
		}
	}
	return nil
}

// HostIP is the bridge's address in the root namespace: what every node
// reaches whatever the faults, where the suite's own servers listen.
func (w *Network) HostIP() string { return w.subnet + ".254" }

// Namespace is node i's network namespace (i from 0).
func (w *Network) Namespace(i int) string { return fmt.Sprintf("%sn%d", w.tag, i+1) }

// IP is node i's address.
func (w *Network) IP(i int) string { return fmt.Sprintf("%s.%d", w.subnet, i+1) }

func (w *Network) hostVeth(i int) string { return w.tag + "h" + strconv.Itoa(i) }

// Cut drops every packet from a to b and from b to a.
func (w *Network) Cut(a, b int) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return errors.Join(w.cutLocked(a, b), w.cutLocked(b, a))
}

func (w *Network) cutLocked(from, to int) error {
	if from == to || w.cuts[[2]int{from, to}] {
		return nil
	}
	if err := ip(w.Namespace(from), "route", "add", "blackhole", w.IP(to)+"/32"); err != nil {
		return err
	}
	w.cuts[[2]int{from, to}] = true
	return nil
}

// Partition cuts every path between nodes of different groups; nodes in no
// group keep all their links.
func (w *Network) Partition(groups [][]int) error {
	var errs []error
	for gi, g := range groups {
		for _, h := range groups[gi+1:] {
			for _, a := range g {
				for _, b := range h {
					errs = append(errs, w.Cut(a, b))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// Isolate cuts node i from every other node (clients still reach it).
func (w *Network) Isolate(i int) error {
	var others []int
	for j := range w.nodes {
		if j != i {
			others = append(others, j)
		}
	}
	return w.Partition([][]int{{i}, others})
}

// HealPartitions removes every cut.
func (w *Network) HealPartitions() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var errs []error
	for c := range w.cuts {
		if err := ip(w.Namespace(c[0]), "route", "del", "blackhole", w.IP(c[1])+"/32"); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(w.cuts, c)
	}
	return errors.Join(errs...)
}

// Delay slows both directions of node i's link: netem delay when the kernel
// has it, else a token bucket of 512 kbit/s that queues up to 400 ms (delay
// under load, drops past it). It returns what it installed.
func (w *Network) Delay(i int, rng *rand.Rand) (string, error) {
	var args []string
	if w.Netem {
		ms := 50 + rng.IntN(150)
		args = []string{"netem", "delay", fmt.Sprintf("%dms", ms), fmt.Sprintf("%dms", ms/2), "distribution", "normal"}
	} else {
		args = []string{"tbf", "rate", "512kbit", "burst", "4kb", "latency", "400ms"}
	}
	return strings.Join(args, " "), w.shape(i, args)
}

// Loss drops packets on node i's link: netem loss when the kernel has it,
// else a flapping link whose blackhole routes to every peer come and go
// every 50–250 ms (bursty loss, half of the time), until HealLinks.
func (w *Network) Loss(i int, rng *rand.Rand) (string, error) {
	if w.Netem {
		pct := 10 + rng.IntN(30)
		args := []string{"netem", "loss", fmt.Sprintf("%d%%", pct), "25%"}
		return strings.Join(args, " "), w.shape(i, args)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.flapper[i]; ok {
		return "flapping already", nil
	}
	stop := make(chan struct{})
	w.flapper[i] = stop
	seed := rng.Uint64()
	go w.flap(i, stop, rand.New(rand.NewPCG(seed, seed)))
	return "flapping blackhole to every peer (no sch_netem in this kernel)", nil
}

func (w *Network) flap(i int, stop chan struct{}, rng *rand.Rand) {
	down := false
	for {
		select {
		case <-stop:
			return
		case <-time.After(time.Duration(50+rng.IntN(200)) * time.Millisecond):
		}
		w.mu.Lock()
		for j := range w.nodes {
			if j == i {
				continue
			}
			for _, c := range [][2]int{{i, j}, {j, i}} {
				if down {
					if w.cuts[c] && ip(w.Namespace(c[0]), "route", "del", "blackhole", w.IP(c[1])+"/32") == nil {
						delete(w.cuts, c)
					}
				} else {
					_ = w.cutLocked(c[0], c[1])
				}
			}
		}
		w.mu.Unlock()
		down = !down
	}
}

func (w *Network) shape(i int, qdisc []string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.shaped[i] = true
	inNS := append([]string{"netns", "exec", w.Namespace(i), "tc", "qdisc", "replace", "dev", "eth0", "root"}, qdisc...)
	onHost := append([]string{"qdisc", "replace", "dev", w.hostVeth(i), "root"}, qdisc...)
	return errors.Join(run("ip", inNS...), run("tc", onHost...))
}

// HealLinks stops flapping and removes every qdisc the suite installed.
func (w *Network) HealLinks() error {
	w.mu.Lock()
	for i, stop := range w.flapper {
		close(stop)
		delete(w.flapper, i)
	}
	shaped := w.shaped
	w.shaped = map[int]bool{}
	w.mu.Unlock()
	var errs []error
	for i := range shaped {
		if err := run("ip", "netns", "exec", w.Namespace(i), "tc", "qdisc", "del", "dev", "eth0", "root"); err != nil && !strings.Contains(err.Error(), "No such file") && !strings.Contains(err.Error(), "Cannot delete qdisc with handle of zero") {
			errs = append(errs, err)
		}
		if err := run("tc", "qdisc", "del", "dev", w.hostVeth(i), "root"); err != nil && !strings.Contains(err.Error(), "No such file") && !strings.Contains(err.Error(), "Cannot delete qdisc with handle of zero") {
			errs = append(errs, err)
		}
	}
	// A flapper may have left cuts: those go with the partitions.
	return errors.Join(append(errs, w.HealPartitions())...)
}

// Heal removes every fault of the network.
func (w *Network) Heal() error { return w.HealLinks() }

// Close deletes the namespaces (their veths go with them) and the bridge.
func (w *Network) Close() error {
	w.mu.Lock()
	for i, stop := range w.flapper {
		close(stop)
		delete(w.flapper, i)
	}
	w.mu.Unlock()
	var errs []error
	for i := range w.nodes {
		if err := ip("", "netns", "del", w.Namespace(i)); err != nil && !strings.Contains(err.Error(), "No such file") {
			errs = append(errs, err)
		}
		_ = ip("", "link", "del", w.hostVeth(i)) // gone with the namespace, unless the move failed
	}
	if w.bridge != "" {
		if err := ip("", "link", "del", w.bridge); err != nil && !strings.Contains(err.Error(), "Cannot find device") {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// CleanStale deletes namespaces and links named by a run whose process is
// gone (an interrupted test, a killed `make torture`).
func CleanStale() {
	stale := func(name string) bool {
		if !strings.HasPrefix(name, namePrefix) {
			return false
		}
		rest := name[len(namePrefix):]
		end := strings.IndexByte(rest, '-')
		if end <= 0 {
			return false
		}
		pid, err := strconv.ParseInt(rest[:end], 36, 64)
		if err != nil || pid == int64(os.Getpid()) {
			return false
		}
		_, err = os.Stat(fmt.Sprintf("/proc/%d", pid))
		return os.IsNotExist(err)
	}
	if out, err := output("ip", "netns", "list"); err == nil {
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) > 0 && stale(f[0]) {
				// Node processes left running in it go first.
				if pids, err := output("ip", "netns", "pids", f[0]); err == nil {
					for _, p := range strings.Fields(pids) {
						if pid, err := strconv.Atoi(p); err == nil {
							_ = syscall.Kill(pid, syscall.SIGKILL)
						}
					}
				}
				_ = ip("", "netns", "del", f[0])
			}
		}
	}
	if out, err := output("ip", "-o", "link", "show"); err == nil {
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
			if stale(name) {
				_ = ip("", "link", "del", name)
			}
		}
	}
}
