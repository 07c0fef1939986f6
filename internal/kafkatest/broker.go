package kafkatest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	// nodeID is the broker's and controller's node.id.
	nodeID = 1
	// readyTimeout bounds a start when ctx has no earlier deadline. A JVM on a
	// busy two-core machine running tests in parallel can be slow.
	readyTimeout = 90 * time.Second
	// stopGrace is how long Stop lets the broker shut down before killing it.
	stopGrace = 5 * time.Second
	// startAttempts bounds retries when a port picked as free was taken by
	// another process before the broker bound it.
	startAttempts = 3
	// heap is the broker JVM's maximum heap: tests run brokers side by side.
	heap = "-Xmx512m"

	configFile = "server.properties"
	log4jFile  = "log4j2.properties"
	logFile    = "kafka.log" // the JVM's stdout and stderr
	dataSubdir = "data"      // log.dirs, which also holds the KRaft metadata log
)

// Broker is a real single-node Apache Kafka broker (KRaft, combined broker
// and controller) run as a child JVM. It is killed if the Go process dies.
type Broker struct {
	addr string
	// saslAddr and mtlsAddr are a secure broker's other listeners.
	saslAddr, mtlsAddr string
	dir                string
	cmd                *exec.Cmd
	log                *os.File

	exited  chan struct{} // closed once the JVM has exited
	waitErr error         // the JVM's exit status; read only after exited closes

	stopOnce sync.Once
	stopErr  error
}

// Start starts a broker in a temporary directory for a test and returns once
// it accepts produce requests. It fails t, with the reason and the broker's
// log tail, if the broker cannot start. The broker is stopped and its data
// removed when t ends; a broker that died before then fails t.
func Start(t testing.TB) *Broker {
	t.Helper()
	start := time.Now()
	b, err := Run(context.Background(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kafkatest: Kafka %s broker serving on %s after %v", Version, b.addr, time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if err := b.Stop(); err != nil {
			t.Error(err)
		}
	})
	return b
}

// Run starts a broker with its data under dir and returns once it accepts
// produce requests; ctx bounds only the start, and the broker runs until
// Stop. The JVM's output goes to dir/kafka.log and, if logw is not nil, to
// logw too.
//
// Run on a directory holding a stopped broker's data restarts that broker
// on its previous ports (so clients' bootstrap addresses stay valid) with
// its topics and records.
func Run(ctx context.Context, dir string, logw io.Writer) (*Broker, error) {
	return run(ctx, dir, logw, nil)
}

// run starts a broker, with sec's listeners if a new one is formatted.
func run(ctx context.Context, dir string, logw io.Writer, sec *Security) (*Broker, error) {
	java, err := javaPath()
	if err != nil {
		return nil, err
	}
	libs, err := libsDir()
	if err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, readyTimeout)
		defer cancel()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("kafkatest: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, log4jFile), []byte(log4jConfig), 0o644); err != nil {
		return nil, fmt.Errorf("kafkatest: %w", err)
	}
	jvm := &jvm{java: java, libs: libs, dir: dir, logw: logw, sec: sec}

	conf := filepath.Join(dir, configFile)
	if addrs, err := advertisedAddrs(conf); err == nil {
		return jvm.start(ctx, addrs)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		addrs, err := jvm.format(ctx)
		if err != nil {
			return nil, err
		}
		b, err := jvm.start(ctx, addrs)
		if err == nil || attempt == startAttempts || !errors.Is(err, errPortTaken) {
			return b, err
		}
		// Start over from a fresh directory on new ports.
		os.Remove(conf)
		os.RemoveAll(filepath.Join(dir, dataSubdir))
	}
}

// Addr returns the broker's bootstrap address, "127.0.0.1:PORT".
func (b *Broker) Addr() string { return b.addr }

// Stop shuts the broker down: SIGTERM, then SIGKILL if it is still running
// after a few seconds. It returns once the JVM has exited, and an error if
// the broker had died before Stop was called. Later calls return the first
// call's result.
func (b *Broker) Stop() error {
	b.stopOnce.Do(func() { b.stopErr = b.stop() })
	return b.stopErr
}

func (b *Broker) stop() error {
	defer b.log.Close()
	select {
	case <-b.exited:
		return fmt.Errorf("kafkatest: the broker at %s had exited before Stop: %v\n%s", b.addr, b.waitErr, logTail(b.dir))
	default:
	}
	b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.exited:
	case <-time.After(stopGrace):
		b.cmd.Process.Kill()
		<-b.exited
	}
	return nil
}

// jvm launches Kafka's Java programs for one broker directory.
type jvm struct {
	java, libs, dir string
	logw            io.Writer
	sec             *Security // nil: the plaintext listener only
}

// command returns a java command running class with the broker's jars and
// log configuration, its output appended to the broker's log.
func (j *jvm) command(logf *os.File, maxHeap, class string, args ...string) *exec.Cmd {
	argv := []string{
		maxHeap,
		"-Djava.awt.headless=true",
		"-Dlog4j2.configurationFile=" + filepath.Join(j.dir, log4jFile),
		"-cp", filepath.Join(j.libs, "*"),
		class,
	}
	cmd := exec.Command(j.java, append(argv, args...)...)
	cmd.Dir = j.dir
	var out io.Writer = logf
	if j.logw != nil {
		out = io.MultiWriter(logf, j.logw)
	}
	cmd.Stdout, cmd.Stderr = out, out
	// No broker outlives the process that started it, whatever way it dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

func (j *jvm) openLog() (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(j.dir, logFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("kafkatest: %w", err)
	}
	return f, nil
}

// format writes a configuration on free ports and formats a fresh KRaft log
// directory for it, returning the broker's listeners' addresses.
func (j *jvm) format(ctx context.Context) (map[string]string, error) {
	n := 2
	if j.sec != nil {
		n = 4
	}
	ports, err := freePorts(n)
	if err != nil {
		return nil, err
	}
	var extra *extraListeners
	args := []string{"format", "--config", filepath.Join(j.dir, configFile), "--cluster-id", newClusterID()}
	if j.sec != nil {
		if extra, err = secureConfig(j.dir, j.sec, ports[2], ports[3]); err != nil {
			return nil, err
		}
		args = append(args, scramArgs(j.sec)...)
	}
	conf := filepath.Join(j.dir, configFile)
	text := serverConfig(j.dir, ports[0], ports[1], extra)
	addrs, err := listenerAddrs(text)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		return nil, fmt.Errorf("kafkatest: %w", err)
	}
	logf, err := j.openLog()
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := j.command(logf, "-Xmx256m", "kafka.tools.StorageTool", args...)
	// The tool is short-lived; ctx bounds it like the rest of the start.
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("kafkatest: formatting the broker's storage: %w", err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		cmd.Process.Kill()
		<-done
		err = ctx.Err()
	}
	if err != nil {
		os.Remove(conf) // a configuration marks a formatted directory
		return nil, fmt.Errorf("kafkatest: formatting the broker's storage in %s: %w\n%s", j.dir, err, logTail(j.dir))
	}
	return addrs, nil
}

// errPortTaken marks a start that failed because a port picked as free was
// bound by someone else in the meantime.
var errPortTaken = errors.New("port taken")

// start runs the broker and waits until it serves.
func (j *jvm) start(ctx context.Context, addrs map[string]string) (*Broker, error) {
	logf, err := j.openLog()
	if err != nil {
		return nil, err
	}
	logStart, err := logf.Seek(0, io.SeekEnd)
	if err != nil {
		logf.Close()
		return nil, fmt.Errorf("kafkatest: %w", err)
	}
	b := &Broker{addr: addrs["PLAINTEXT"], saslAddr: addrs[listenerSASL], mtlsAddr: addrs[listenerMTLS],
		dir: j.dir, log: logf, exited: make(chan struct{})}
	b.cmd = j.command(logf, heap, "kafka.Kafka", filepath.Join(j.dir, configFile))
	if err := b.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("kafkatest: starting the broker: %w", err)
	}
	go func() {
		b.waitErr = b.cmd.Wait()
		close(b.exited)
	}()
	if err := b.waitReady(ctx, logStart); err != nil {
		b.cmd.Process.Kill()
		<-b.exited
		b.log.Close()
		return nil, err
	}
	return b, nil
}

// waitReady returns once the broker lists itself in a metadata response,
// which KRaft brokers do only once the controller has unfenced them, so that
// topics can be created and produced to. It fails as soon as the broker
// logs, past logStart, that it is giving up: its exit can take half a minute.
func (b *Broker) waitReady(ctx context.Context, logStart int64) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.DialTimeout(time.Second))
	if err != nil {
		return fmt.Errorf("kafkatest: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		brokers, err := adm.ListBrokers(actx)
		cancel()
		if err == nil {
			if slices.ContainsFunc(brokers, func(d kadm.BrokerDetail) bool { return d.NodeID == nodeID }) {
				return nil
			}
			err = fmt.Errorf("metadata lists brokers %v, not node %d", brokers.NodeIDs(), nodeID)
		}
		last = err
		if log := b.logSince(logStart); strings.Contains(log, "Exiting Kafka due to fatal exception") {
			err := fmt.Errorf("kafkatest: the broker failed to start\n%s", logTail(b.dir))
			if strings.Contains(log, "Address already in use") {
				err = fmt.Errorf("%w: %w", errPortTaken, err)
			}
			return err
		}
		select {
		case <-b.exited:
			return fmt.Errorf("kafkatest: the broker exited during its start (%v)\n%s", b.waitErr, logTail(b.dir))
		case <-ctx.Done():
			return fmt.Errorf("kafkatest: the broker at %s is not serving: %w (last attempt: %v)\n%s", b.addr, ctx.Err(), last, logTail(b.dir))
		case <-tick.C:
		}
	}
}

// logSince returns the broker's log past offset.
func (b *Broker) logSince(offset int64) string {
	data, err := os.ReadFile(filepath.Join(b.dir, logFile))
	if err != nil || int64(len(data)) < offset {
		return ""
	}
	return string(data[offset:])
}

// serverConfig is a single node's broker and controller configuration,
// with extra's listeners if not nil. Internal topics get one replica, the
// only one there can be.
func serverConfig(dir string, brokerPort, controllerPort int, extra *extraListeners) string {
	if extra == nil {
		extra = &extraListeners{}
	}
	return fmt.Sprintf(`process.roles=broker,controller
node.id=%[1]d
controller.quorum.voters=%[1]d@127.0.0.1:%[3]d
listeners=PLAINTEXT://127.0.0.1:%[2]d,CONTROLLER://127.0.0.1:%[3]d%[5]s
advertised.listeners=PLAINTEXT://127.0.0.1:%[2]d%[5]s
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT%[6]s
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
log.dirs=%[4]s
auto.create.topics.enable=true
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
num.network.threads=2
num.io.threads=4
num.recovery.threads.per.data.dir=1
%[7]s`, nodeID, brokerPort, controllerPort, filepath.Join(dir, dataSubdir), extra.listeners, extra.protocols, extra.config)
}

// log4jConfig keeps the broker quiet: warnings, errors, and the line saying
// it started.
const log4jConfig = `status = error
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.out.ref = out
logger.server.name = kafka.server.KafkaRaftServer
logger.server.level = INFO
`

// advertisedAddrs reads the broker's listeners' addresses from an existing
// configuration.
func advertisedAddrs(conf string) (map[string]string, error) {
	b, err := os.ReadFile(conf)
	if err != nil {
		return nil, err
	}
	addrs, err := listenerAddrs(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", conf, err)
	}
	return addrs, nil
}

// listenerAddrs maps the advertised listeners' names to their addresses
// in a configuration's text.
func listenerAddrs(conf string) (map[string]string, error) {
	const key = "advertised.listeners="
	sc := bufio.NewScanner(strings.NewReader(conf))
	sc.Buffer(nil, 1<<20) // inline PEM makes long lines
	for sc.Scan() {
		list, ok := strings.CutPrefix(sc.Text(), key)
		if !ok {
			continue
		}
		out := map[string]string{}
		for _, l := range strings.Split(list, ",") {
			name, addr, ok := strings.Cut(l, "://")
			if !ok {
				return nil, fmt.Errorf("kafkatest: advertised listener %q is not NAME://host:port", l)
			}
			out[name] = addr
		}
		if out["PLAINTEXT"] == "" {
			return nil, fmt.Errorf("kafkatest: no PLAINTEXT listener in %q", list)
		}
		return out, nil
	}
	return nil, fmt.Errorf("kafkatest: no %q line", key)
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("kafkatest: picking a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// newClusterID returns a random cluster ID in the form Kafka's Uuid prints:
// 16 bytes in unpadded URL-safe base64.
// newClusterID returns a random cluster id (16 bytes, URL-safe base64, as
// Kafka's Uuid). Like Kafka's own, it never starts with '-': kafka-storage
// would take it for an option ("argument --cluster-id: expected one
// argument", one broker start in 64 failed that way).
func newClusterID() string {
	for {
		var id [16]byte
		rand.Read(id[:])
		if s := base64.RawURLEncoding.EncodeToString(id[:]); s[0] != '-' {
			return s
		}
	}
}

// logTail returns the last lines of the broker's log, for error messages.
func logTail(dir string) string {
	const lines = 40
	data, err := os.ReadFile(filepath.Join(dir, logFile))
	if err != nil {
		return fmt.Sprintf("(no broker log: %v)", err)
	}
	all := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return "broker log tail (" + filepath.Join(dir, logFile) + "):\n" + string(bytes.Join(all, []byte("\n")))
}
