package embedetcd

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func freeURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "http://" + l.Addr().String()
}

// TestThreeMembersFormOneCluster starts three members with one initial
// cluster, writes through one and reads through another, and keeps serving
// with one member stopped.
func TestThreeMembersFormOneCluster(t *testing.T) {
	dir := t.TempDir()
	cfgs := make([]MemberConfig, 3)
	var initial []string
	for i := range cfgs {
		cfgs[i] = MemberConfig{Dir: filepath.Join(dir, fmt.Sprint(i)), Name: fmt.Sprintf("m%d", i), PeerURL: freeURL(t), ClientURL: freeURL(t)}
		initial = append(initial, cfgs[i].Name+"="+cfgs[i].PeerURL)
	}
	srvs := make([]*Server, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range cfgs {
		cfgs[i].InitialCluster = strings.Join(initial, ",")
		wg.Add(1)
		go func() {
			defer wg.Done()
			srvs[i], errs[i] = StartMember(context.Background(), cfgs[i], testLogger(t))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("member %d: %v", i, err)
		}
	}
	defer func() {
		for _, s := range srvs[1:] {
			s.Close()
		}
	}()
	cli := func(s *Server) *clientv3.Client {
		c, err := clientv3.New(clientv3.Config{Endpoints: s.Endpoints(), DialTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli(srvs[0]).Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	srvs[0].Close()
	c2 := cli(srvs[2])
	if _, err := c2.Put(ctx, "k2", "v2"); err != nil {
		t.Fatalf("write with one member down: %v", err)
	}
	resp, err := c2.Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("read through another member: %v %v", resp, err)
	}
	ml, err := c2.MemberList(ctx)
	if err != nil || len(ml.Members) != 3 {
		t.Fatalf("members: %v %v", ml, err)
	}
}
