package main

import (
	"strings"
	"testing"
)

func TestCLIQuotaSetGetListDelete(t *testing.T) {
	c := startDev(t)
	c.ok("", "schema", "put", "Shop", "--partitions", "1", "--replicas", "1")
	c.ok(`{"key":[{"name":"sku","type":"string"}],"schema":{"type":"record","name":"Item","fields":[{"name":"note","type":"string"}]}}`, "schema", "put", "Shop/Item")

	expect(t, "quota set database", c.ok("", "quota", "set", "database", "Shop", "--read", "100", "--write", "1"), `{
  "name": "Shop",
  "readUnitsPerSecond": 100,
  "writeUnitsPerSecond": 1
}
`)
	expect(t, "quota set user", c.ok("", "quota", "set", "user", "ann", "--read", "5"), `{
  "name": "ann",
  "readUnitsPerSecond": 5,
  "writeUnitsPerSecond": 0
}
`)
	expect(t, "quota get", c.ok("", "quota", "get", "db", "Shop"), `{
  "name": "Shop",
  "readUnitsPerSecond": 100,
  "writeUnitsPerSecond": 1
}
`)
	expect(t, "quota list", c.ok("", "quota", "list"), `{
  "databases": [
    {
      "name": "Shop",
      "readUnitsPerSecond": 100,
      "writeUnitsPerSecond": 1
    }
  ],
  "users": [
    {
      "name": "ann",
      "readUnitsPerSecond": 5,
      "writeUnitsPerSecond": 0
    }
  ]
}
`)

	// The dev node keeps 10 s of burst: 10 units. A 4500-byte document
	// is 5 units: two writes spend the credit, a third is admitted into
	// debt and the fourth is refused. Without retries the CLI reports the
	// 429 at once.
	doc := `{"note":"` + strings.Repeat("x", 4500) + `"}`
	c.ok("", "put", "Shop/Item/a", "-d", doc)
	c.ok("", "put", "Shop/Item/b", "-d", doc)
	c.ok("", "put", "Shop/Item/c", "-d", doc)
	_, errs, code := c.run("", "--retry", "0", "put", "Shop/Item/d", "-d", doc)
	if code != 1 || !strings.HasPrefix(errs, "doppio: database Shop is over its write quota of 1 units per second; retry in ") {
		t.Fatalf("put over quota: exit %d, stderr %q", code, errs)
	}
	if _, errs, code := c.run("", "get", "Shop/Item/d"); code != exitNotFound || !strings.Contains(errs, "does not exist") {
		t.Fatalf("the refused write's document: exit %d, stderr %q", code, errs)
	}

	for _, bad := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"quota", "set", "database", "Shop"}, exitFailure, "doppio: give --read, --write or both (units per second, 0 = unlimited)\n"},
		{[]string{"quota", "set", "table", "Shop", "--read", "1"}, exitFailure, "doppio: \"table\" is not a quota's scope: say database or user\n"},
		{[]string{"quota", "set", "database", "Shop", "--write", "-1"}, exitFailure, "doppio: writeUnitsPerSecond is -1; it must be 0 (unlimited) to 1099511627776\n"},
		{[]string{"quota", "set", "database", "Nope", "--write", "1"}, exitNotFound, "doppio: database Nope does not exist\n"},
		{[]string{"quota", "get", "user", "bob"}, exitNotFound, "doppio: user bob has no quota\n"},
	} {
		if _, errs, code := c.run("", bad.args...); code != bad.code || errs != bad.err {
			t.Errorf("doppio %s: exit %d, stderr %q; want %d, %q", strings.Join(bad.args, " "), code, errs, bad.code, bad.err)
		}
	}
	// Nothing changed.
	if out := c.ok("", "quota", "get", "database", "Shop"); !strings.Contains(out, `"writeUnitsPerSecond": 1`) {
		t.Fatalf("after refused changes: %s", out)
	}

	expect(t, "quota delete", c.ok("", "quota", "delete", "database", "Shop"), "quota of database Shop deleted\n")
	if _, errs, code := c.run("", "quota", "get", "database", "Shop"); code != exitNotFound || errs != "doppio: database Shop has no quota\n" {
		t.Fatalf("quota get after delete: exit %d, stderr %q", code, errs)
	}
	c.ok("", "put", "Shop/Item/d", "-d", doc)
}
