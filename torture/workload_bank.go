package torture

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"time"
)

// Bank is the transfer workload: one document group holds accounts in two
// tables (Checking and Savings); transactions (POST /{db}/_txn) move money
// between two accounts, each put conditioned on the ETag read (If-Match),
// so no account goes negative and no update is lost. Every snapshot read
// must see every account, none negative, and the exact total; at the end
// the total is exact and the accounts' version counters say how many
// transfers were applied: no fewer than acknowledged (else lost), no more
// than acknowledged plus indeterminate.
//
// The API has no read of two tables in one request (a transaction holds
// only writes; collection reads and multi-gets name one table), but one
// collection read is one storage snapshot. A snapshot of both tables is
// therefore read by double collect: table A, table B, table A again; when
// A's version counters did not move, A held those values throughout, so
// (A, B) was the group's state at the instant B was read. A read where A
// moved is recorded as failed (no snapshot) and checks nothing.
type Bank struct {
	// Accounts per table, Clients: defaults 4, 8.
	Accounts, Clients int

	hist *History
}

const (
	bankDB      = "torture_bank"
	bankGroup   = "bank"
	bankInitial = 100
)

var bankTables = []string{"Checking", "Savings"}

func bankTable(name string) string {
	return `{"key":[{"name":"g","type":"string"},{"name":"id","type":"int"}],
 "schema":{"type":"record","name":"` + name + `","fields":[{"name":"balance","type":"long","default":0},{"name":"ver","type":"long","default":0}]}}`
}

// Name implements Workload.
func (w *Bank) Name() string { return "bank" }

func (w *Bank) defaults() {
	if w.Accounts == 0 {
		w.Accounts = 4
	}
	if w.Clients == 0 {
		w.Clients = 8
	}
}

func (w *Bank) total() int64 { return int64(len(bankTables) * w.Accounts * bankInitial) }

// account names one account: "Checking/2".
type account struct {
	Table string `json:"table"`
	ID    int    `json:"id"`
}

func (a account) String() string { return fmt.Sprintf("%s/%d", a.Table, a.ID) }

type balance struct {
	Balance int64 `json:"balance"`
	Ver     int64 `json:"ver"`
}

// Setup implements Workload: every account at bankInitial, version 0.
func (w *Bank) Setup(ctx context.Context, t Target) error {
	w.defaults()
	c, err := setupDatabase(ctx, t, 13, bankDB, map[string]string{"Checking": bankTable("Checking"), "Savings": bankTable("Savings")})
	if err != nil {
		return err
	}
	var ops []map[string]any
	for _, tb := range bankTables {
		for id := range w.Accounts {
			ops = append(ops, map[string]any{"op": "put", "table": tb, "key": []any{bankGroup, id}, "document": balance{Balance: bankInitial}})
		}
	}
	_, err = c.Retry(ctx, "POST", "/"+bankDB+"/_txn", map[string]any{"partitionKey": bankGroup, "ops": ops}, 200)
	return err
}

// transferInput is a transfer's intent.
type transferInput struct {
	From   account `json:"from"`
	To     account `json:"to"`
	Amount int64   `json:"amount"`
}

// Run implements Workload.
func (w *Bank) Run(ctx context.Context, t Target, rng *rand.Rand) error {
	w.defaults()
	return runClients(ctx, t, rng, w.Clients, &w.hist, func(c *Client, seq int64) {
		if c.rng.IntN(4) == 0 {
			w.read(ctx, c)
		} else {
			w.transfer(ctx, c)
		}
	})
}

func (w *Bank) randomAccount(rng *rand.Rand) account {
	return account{Table: bankTables[rng.IntN(len(bankTables))], ID: rng.IntN(w.Accounts)}
}

// get reads one account (not recorded: the transfer's conditions make what
// it read irrelevant to the check).
func (w *Bank) get(ctx context.Context, c *Client, a account) (balance, string, bool) {
	resp, err := c.Do(ctx, "GET", fmt.Sprintf("/%s/%s/%s/%d", bankDB, a.Table, bankGroup, a.ID), nil)
	var b balance
	if Classify(false, resp, err) != Acked || resp.Decode(&b) != nil {
		return b, "", false
	}
	return b, resp.Header.Get("ETag"), true
}

func (w *Bank) transfer(ctx context.Context, c *Client) {
	from, to := w.randomAccount(c.rng), w.randomAccount(c.rng)
	if from == to {
		return
	}
	fb, fe, ok1 := w.get(ctx, c, from)
	tb, te, ok2 := w.get(ctx, c, to)
	if !ok1 || !ok2 || fb.Balance <= 0 {
		return
	}
	amt := 1 + c.rng.Int64N(min(fb.Balance, 10))
	op := w.hist.Invoke(c.ID, "transfer", bankGroup, true, transferInput{From: from, To: to, Amount: amt})
	body := map[string]any{"partitionKey": bankGroup, "ops": []map[string]any{
		{"op": "put", "table": from.Table, "key": []any{bankGroup, from.ID}, "document": balance{Balance: fb.Balance - amt, Ver: fb.Ver + 1}, "ifMatch": fe},
		{"op": "put", "table": to.Table, "key": []any{bankGroup, to.ID}, "document": balance{Balance: tb.Balance + amt, Ver: tb.Ver + 1}, "ifMatch": te},
	}}
	resp, err := c.Do(ctx, "POST", "/"+bankDB+"/_txn", body)
	w.hist.Complete(op, Classify(true, resp, err), nil, describe(resp, err))
}

// snapshot maps every account ("Checking/2") to its balance.
type snapshot map[string]balance

// readTable reads one table's accounts in the group (one collection read:
// one storage snapshot).
func (w *Bank) readTable(ctx context.Context, c *Client, table string) (map[account]balance, error) {
	resp, err := c.Do(ctx, "GET", fmt.Sprintf("/%s/%s/%s?limit=1000", bankDB, table, bankGroup), nil)
	if Classify(false, resp, err) != Acked {
		return nil, describe(resp, err)
	}
	var page struct {
		Documents []struct {
			Key      []any   `json:"key"`
			Document balance `json:"document"`
		} `json:"documents"`
	}
	if err := resp.Decode(&page); err != nil {
		return nil, err
	}
	out := map[account]balance{}
	for _, d := range page.Documents {
		id, _ := num(d.Key[len(d.Key)-1])
		out[account{table, int(id)}] = d.Document
	}
	return out, nil
}

// read records a double-collect snapshot read of both tables.
func (w *Bank) read(ctx context.Context, c *Client) (snapshot, bool) {
	op := w.hist.Invoke(c.ID, "read", bankGroup, false, nil)
	a, b := bankTables[0], bankTables[1]
	if c.rng.IntN(2) == 0 {
		a, b = b, a
	}
	// A, B, A, B, A...: the first two consecutive equal reads of A make a
	// snapshot with the B read between them.
	first, err := w.readTable(ctx, c, a)
	var second map[account]balance
	settled := false
	for round := 0; round < 5 && err == nil && !settled; round++ {
		var again map[account]balance
		if second, err = w.readTable(ctx, c, b); err != nil {
			break
		}
		if again, err = w.readTable(ctx, c, a); err != nil {
			break
		}
		settled = sameVersions(first, again)
		first = again
	}
	if err != nil {
		w.hist.Complete(op, Failed, nil, err)
		return nil, false
	}
	if !settled {
		w.hist.Complete(op, Failed, nil, fmt.Errorf("no snapshot: %s kept moving during the read", a))
		return nil, false
	}
	s := snapshot{}
	for k, v := range first {
		s[k.String()] = v
	}
	for k, v := range second {
		s[k.String()] = v
	}
	w.hist.Complete(op, Acked, s, nil)
	return s, true
}

// sameVersions reports whether two reads of a table saw the same accounts
// at the same versions.
func sameVersions(x, y map[account]balance) bool {
	if len(x) != len(y) {
		return false
	}
	for k, v := range x {
		if w, ok := y[k]; !ok || w.Ver != v.Ver {
			return false
		}
	}
	return true
}

// Check implements Workload: a final snapshot after the heal, then every
// snapshot's total and the transfers' count.
func (w *Bank) Check(ctx context.Context, t Target, dir string) Result {
	w.defaults()
	if w.hist == nil {
		return Result{Workload: w.Name(), Failures: []string{"bank: Check before Run"}}
	}
	c := NewClient(-1, t.Endpoints(), newHTTPClient(t), rand.New(rand.NewPCG(15, 16)))
	res := w.hist.result(w.Name())
	var final snapshot
	for ctx.Err() == nil {
		var ok bool
		if final, ok = w.read(ctx, c); ok {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if final == nil {
		res.Failures = append(res.Failures, "bank: no final snapshot read before the check's deadline")
		return res
	}
	return judgeBank(res, w.hist.Ops(), final, len(bankTables)*w.Accounts, w.total(), dir)
}

// judgeBank checks every snapshot read (count, no negative balance, the
// exact total) and, from the final snapshot's version counters, how many
// transfers were applied.
func judgeBank(res Result, ops []Op, final snapshot, accounts int, total int64, dir string) Result {
	for _, op := range ops {
		if op.Kind != "read" || op.Outcome != Acked {
			continue
		}
		s, _ := op.Output.(snapshot)
		var sum int64
		var neg []string
		for a, b := range s {
			sum += b.Balance
			if b.Balance < 0 {
				neg = append(neg, fmt.Sprintf("%s=%d", a, b.Balance))
			}
		}
		sort.Strings(neg)
		if len(s) != accounts || sum != total || len(neg) > 0 {
			res.Violations++
			res.Failures = append(res.Failures, fmt.Sprintf("bank: read at %.3fs saw %d accounts totalling %d (want %d totalling %d), negative: %v: %s",
				op.Invoke.Seconds(), len(s), sum, accounts, total, neg, describeSnapshot(s)))
		}
	}
	var vers int64
	for _, b := range final {
		vers += b.Ver
	}
	var acked, indet int64
	for _, op := range ops {
		if op.Kind == "transfer" {
			switch op.Outcome {
			case Acked:
				acked++
			case Indeterminate, Pending:
				indet++
			}
		}
	}
	applied := vers / 2
	switch {
	case vers%2 != 0:
		res.Violations++
		res.Failures = append(res.Failures, fmt.Sprintf("bank: the accounts' versions sum to %d, odd: a transfer was half applied", vers))
	case applied < acked:
		res.Lost += int(acked - applied)
		res.Failures = append(res.Failures, fmt.Sprintf("bank: %d transfers applied, %d acknowledged (%d lost)", applied, acked, acked-applied))
	case applied > acked+indet:
		res.Violations++
		res.Failures = append(res.Failures, fmt.Sprintf("bank: %d transfers applied, more than %d acknowledged + %d indeterminate", applied, acked, indet))
	}
	if !res.OK() && dir != "" {
		p := dir + "/bank-history.jsonl"
		if WriteJSONL(p, ops) == nil {
			res.Artifacts = append(res.Artifacts, p)
		}
	}
	return res
}

func describeSnapshot(s snapshot) string {
	var parts []string
	for a, b := range s {
		parts = append(parts, fmt.Sprintf("%s=%d(v%d)", a, b.Balance, b.Ver))
	}
	sort.Strings(parts)
	return fmt.Sprint(parts)
}

// History is the run's recorded history (nil before Run).
func (w *Bank) History() *History { return w.hist }
