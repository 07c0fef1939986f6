package quota

import (
	"fmt"
	"math"
)

// Bytes per unit.
const (
	ReadUnitBytes  = 4 << 10
	WriteUnitBytes = 1 << 10
)

// Unit is the kind of capacity a request consumes.
type Unit uint8

const (
	Read Unit = iota
	Write
)

func (u Unit) String() string {
	if u == Read {
		return "read"
	}
	return "write"
}

// ReadUnits is what a read request that read n bytes costs: n in whole
// 4 KiB, at least 1.
func ReadUnits(n int) int64 { return unitsOf(n, ReadUnitBytes) }

// WriteUnits is what a write request whose write set is n bytes costs: n
// in whole KiB, at least 1.
func WriteUnits(n int) int64 { return unitsOf(n, WriteUnitBytes) }

func unitsOf(n, per int) int64 {
	if n <= per {
		return 1
	}
	return int64((n + per - 1) / per)
}

// MaxUnitsPerSecond bounds a quota: far above what any cluster serves, and
// low enough that a bucket's arithmetic stays exact in a float64.
const MaxUnitsPerSecond = 1 << 40

// Quota is a limit in units per second. Zero (or absent, in JSON) means
// unlimited; the zero Quota limits nothing.
type Quota struct {
	ReadUnitsPerSecond  int64 `json:"readUnitsPerSecond,omitempty"`
	WriteUnitsPerSecond int64 `json:"writeUnitsPerSecond,omitempty"`
}

// Of is q's limit of unit u, 0 for unlimited.
func (q Quota) Of(u Unit) int64 {
	if u == Read {
		return q.ReadUnitsPerSecond
	}
	return q.WriteUnitsPerSecond
}

// Unlimited reports whether q limits nothing.
func (q Quota) Unlimited() bool { return q.ReadUnitsPerSecond == 0 && q.WriteUnitsPerSecond == 0 }

// Validate says which field of q is out of range, if one is.
func (q Quota) Validate() (field string, err error) {
	for _, f := range []struct {
		name string
		v    int64
	}{{"readUnitsPerSecond", q.ReadUnitsPerSecond}, {"writeUnitsPerSecond", q.WriteUnitsPerSecond}} {
		if f.v < 0 || f.v > MaxUnitsPerSecond {
			return f.name, fmt.Errorf("%s is %d; it must be 0 (unlimited) to %d", f.name, f.v, int64(MaxUnitsPerSecond))
		}
	}
	return "", nil
}

// retrySeconds is d as a Retry-After: whole seconds, rounded up, at least
// 1 (a refused request has no credit now).
func retrySeconds(seconds float64) int {
	s := math.Ceil(seconds)
	if s < 1 || math.IsNaN(s) {
		return 1
	}
	if s > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(s)
}
