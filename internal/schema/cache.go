package schema

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/doppio-db/doppio/internal/problem"
)

// CacheSettings say that a table's documents are kept in the cache tier
// and for how long (docs/design/cache.md). Their JSON form is
// {"ttl":"10m","bootstrapEvery":"5m"}.
type CacheSettings struct {
	// TTL is how long an entry lives after its last write.
	TTL time.Duration
	// BootstrapEvery is how often every entry is rewritten from a
	// snapshot; always shorter than TTL, so an entry a missed change left
	// wrong does not outlive one TTL.
	BootstrapEvery time.Duration
}

// Bounds of CacheSettings.
const (
	MinCacheTTL = time.Second
	MaxCacheTTL = 7 * 24 * time.Hour
	// MinBootstrapEvery keeps a bootstrap from running back to back.
	MinBootstrapEvery = 500 * time.Millisecond
)

type cacheJSON struct {
	TTL            string `json:"ttl"`
	BootstrapEvery string `json:"bootstrapEvery,omitempty"`
}

// MarshalJSON writes the durations as Go duration strings.
func (c CacheSettings) MarshalJSON() ([]byte, error) {
	return json.Marshal(cacheJSON{TTL: c.TTL.String(), BootstrapEvery: c.BootstrapEvery.String()})
}

// UnmarshalJSON reads what MarshalJSON writes, without validating (stored
// definitions were validated when written).
func (c *CacheSettings) UnmarshalJSON(b []byte) error {
	var v cacheJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	ttl, err := time.ParseDuration(v.TTL)
	if err != nil {
		return err
	}
	every := ttl / 2
	if v.BootstrapEvery != "" {
		if every, err = time.ParseDuration(v.BootstrapEvery); err != nil {
			return err
		}
	}
	*c = CacheSettings{TTL: ttl, BootstrapEvery: every}
	return nil
}

// ParseCacheSettings decodes and validates the "cache" member of a table
// PUT: null (nil, the tier off for the table) or an object with "ttl"
// (1s to 168h) and optionally "bootstrapEvery" (default half the TTL,
// always less than it). Every problem is Malformed and names its field
// ("cache.ttl").
func ParseCacheSettings(raw json.RawMessage) (*CacheSettings, error) {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, nil
	}
	// A member given as null is a mistake, not a request for its default.
	var members map[string]json.RawMessage
	if json.Unmarshal(raw, &members) == nil {
		for _, k := range []string{"ttl", "bootstrapEvery"} {
			if bytes.Equal(members[k], []byte("null")) {
				return nil, problem.Field(problem.Malformed, "cache."+k, "cache.%s must be a duration, not null", k)
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var v cacheJSON
	if err := dec.Decode(&v); err != nil {
		return nil, problem.Field(problem.Malformed, "cache", `cache must be null or {"ttl":"10m","bootstrapEvery":"5m"}: %v`, err)
	}
	if v.TTL == "" {
		return nil, problem.Field(problem.Malformed, "cache.ttl", `a cacheable table needs a ttl ("10m")`)
	}
	ttl, err := parseDuration("cache.ttl", v.TTL)
	if err != nil {
		return nil, err
	}
	if ttl < MinCacheTTL || ttl > MaxCacheTTL {
		return nil, problem.Field(problem.Malformed, "cache.ttl", "ttl must be %s to %s, not %s", MinCacheTTL, MaxCacheTTL, ttl)
	}
	c := &CacheSettings{TTL: ttl, BootstrapEvery: ttl / 2}
	if v.BootstrapEvery != "" {
		if c.BootstrapEvery, err = parseDuration("cache.bootstrapEvery", v.BootstrapEvery); err != nil {
			return nil, err
		}
		if c.BootstrapEvery >= ttl {
			return nil, problem.Field(problem.Malformed, "cache.bootstrapEvery", "bootstrapEvery (%s) must be less than the ttl (%s), or a missed change could outlive the TTL", c.BootstrapEvery, ttl)
		}
		if c.BootstrapEvery < MinBootstrapEvery {
			return nil, problem.Field(problem.Malformed, "cache.bootstrapEvery", "bootstrapEvery must be at least %s, not %s", MinBootstrapEvery, c.BootstrapEvery)
		}
	}
	return c, nil
}

func parseDuration(field, s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, problem.Field(problem.Malformed, field, "%s %q is not a duration (e.g. \"10m\", \"90s\")", field, s)
	}
	return d, nil
}

// Cacheable reports whether the table's documents are kept in the cache
// tier.
func (d *TableDef) Cacheable() bool { return d.Cache != nil }
