package membership

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/doppio-db/doppio/client/wire"
)

// The operator's intent for each node, and the controller's progress
// towards the placement it implies:
//
//	{prefix}/intents/{id}   JSON Intent: what the operator wants of node id
//	{prefix}/rebalance      JSON Rebalance: the active controller's moves, for /_cluster
//
// A node without an intent key is a member (IntentActive): a node started
// with `doppio start` takes replicas at once unless it was started with
// --standby, which writes IntentStandby if no intent exists yet.
const (
	IntentsDir   = "/intents/"
	RebalanceKey = "/rebalance"
)

// IntentState is what the operator wants of a node.
type IntentState string

const (
	// IntentActive: the node holds replicas and leads (the default).
	IntentActive IntentState = "active"
	// IntentStandby: the node is registered but takes no replicas until
	// `doppio cluster add` makes it active, so that several new nodes
	// join in one rebalance.
	IntentStandby IntentState = "standby"
	// IntentDraining: every replica and leadership moves off the node.
	IntentDraining IntentState = "draining"
	// IntentRemoved: the node was drained and left the cluster; it takes
	// nothing even while its process runs, until added again.
	IntentRemoved IntentState = "removed"
)

// ParseIntentState reads a state's name.
func ParseIntentState(s string) (IntentState, error) {
	switch st := IntentState(s); st {
	case IntentActive, IntentStandby, IntentDraining, IntentRemoved:
		return st, nil
	}
	return "", fmt.Errorf("unknown node state %q (want active, standby, draining or removed)", s)
}

// TakesReplicas reports whether a node in this state may hold replicas:
// only an active one. Placement treats the others as draining (they give
// away what they hold and take nothing new).
func (s IntentState) TakesReplicas() bool { return s == "" || s == IntentActive }

// Intent is the operator's intent for one node.
type Intent struct {
	State IntentState `json:"state"`
	Since time.Time   `json:"since"`
}

// Intents is every recorded intent as read from etcd, with the revision
// of each key (for SetIntent's guard).
type Intents struct {
	ByNode map[string]Intent
	Rev    map[string]int64 // ModRevision of each node's key
}

// State is node id's intent (IntentActive when none is recorded).
func (in Intents) State(id string) IntentState {
	if i, ok := in.ByNode[id]; ok {
		return i.State
	}
	return IntentActive
}

// ReadIntents reads every intent from etcd (not a cache: a decision on
// them must see the latest).
func ReadIntents(ctx context.Context, cli *clientv3.Client, prefix string) (Intents, error) {
	resp, err := cli.Get(ctx, prefix+IntentsDir, clientv3.WithPrefix())
	if err != nil {
		return Intents{}, err
	}
	out := Intents{ByNode: map[string]Intent{}, Rev: map[string]int64{}}
	for _, kv := range resp.Kvs {
		id := strings.TrimPrefix(string(kv.Key), prefix+IntentsDir)
		in, err := decode[Intent](kv.Value)
		if err != nil {
			continue
		}
		out.ByNode[id], out.Rev[id] = in, kv.ModRevision
	}
	return out, nil
}

// ErrIntentsChanged: SetIntent's guard failed, another intent changed
// since it was read.
var ErrIntentsChanged = errors.New("node intents changed concurrently")

// SetIntent records the operator's intent for node id, provided the
// intents of the nodes in guard (node ids) are still as read in seen
// (ErrIntentsChanged otherwise).
func SetIntent(ctx context.Context, cli *clientv3.Client, prefix, id string, st IntentState, seen Intents, guard []string) (Intent, error) {
	in := Intent{State: st, Since: time.Now().UTC()}
	b, err := json.Marshal(in)
	if err != nil {
		return Intent{}, err
	}
	var cmps []clientv3.Cmp
	for _, g := range guard {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(prefix+IntentsDir+g), "=", seen.Rev[g]))
	}
	resp, err := cli.Txn(ctx).If(cmps...).Then(clientv3.OpPut(prefix+IntentsDir+id, string(b))).Commit()
	if err != nil {
		return Intent{}, err
	}
	if !resp.Succeeded {
		return Intent{}, ErrIntentsChanged
	}
	return in, nil
}

// DeclareStandby records IntentStandby for node id unless the node
// already has an intent (a standby node restarted after `cluster add`
// stays active).
func DeclareStandby(ctx context.Context, cli *clientv3.Client, prefix, id string) error {
	b, err := json.Marshal(Intent{State: IntentStandby, Since: time.Now().UTC()})
	if err != nil {
		return err
	}
	key := prefix + IntentsDir + id
	_, err = cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).Then(clientv3.OpPut(key, string(b))).Commit()
	return err
}

// Rebalance is the active controller's progress towards its target
// placement, as written to etcd and shown in /_cluster.
type Rebalance = wire.Rebalance

// ReadRebalance reads the controller's last progress report (ok false if
// none was written yet).
func ReadRebalance(ctx context.Context, cli *clientv3.Client, prefix string) (Rebalance, bool, error) {
	resp, err := cli.Get(ctx, prefix+RebalanceKey)
	if err != nil || len(resp.Kvs) == 0 {
		return Rebalance{}, false, err
	}
	r, err := decode[Rebalance](resp.Kvs[0].Value)
	return r, err == nil, err
}
