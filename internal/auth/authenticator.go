package auth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/doppio-db/doppio/internal/certs"
	"github.com/doppio-db/doppio/internal/problem"
)

// Config tunes an Authenticator; zero values take the defaults.
type Config struct {
	// TokenLifetime is how long a session token from Login is valid
	// (default 1 h).
	TokenLifetime time.Duration
	// LoginRate and LoginBurst set the buckets of password verifications
	// per user and per client address: LoginBurst at once (default 10),
	// then LoginRate per second (default 1).
	LoginRate  float64
	LoginBurst int
	// BasicCacheSize bounds the Basic credentials remembered, and
	// separately the verified session tokens (default 4096 each).
	BasicCacheSize int
	// Registerer receives the authentication metrics, when set.
	Registerer prometheus.Registerer
	// Now, a testing knob, is the clock tokens and rate limits read.
	Now func() time.Time
}

// Refusal reasons, the reason label of doppio_auth_refusals_total.
const (
	ReasonNone          = "none"           // no credentials
	ReasonMalformed     = "malformed"      // an Authorization header that does not parse
	ReasonWrongPassword = "wrong_password" // a known user, another password
	ReasonUnknownUser   = "unknown_user"   // no such user (password or certificate)
	ReasonNoPassword    = "no_password"    // the user has no password set
	ReasonBadToken      = "bad_token"      // forged, tampered, or signed with another key
	ReasonExpired       = "expired"        // a token past its expiry
	ReasonRevoked       = "revoked"        // a token whose user was deleted or changed password
	ReasonNodeCert      = "node_certificate"
	ReasonRateLimited   = "rate_limited"
	ReasonForbidden     = "forbidden" // authenticated, lacking the privilege
	ReasonStale         = "stale"     // this node's copy of the users is too old to trust
)

// Refusal is a refused credential or privilege: a problem (401, 403,
// 429 or 503) and the reason it is counted under.
type Refusal struct {
	Reason  string
	Problem *problem.Error
}

func (r *Refusal) Error() string { return r.Problem.Error() }

// Unwrap lets problem.As find the answer.
func (r *Refusal) Unwrap() error { return r.Problem }

// Challenge is the WWW-Authenticate value of a 401.
const Challenge = `Bearer realm="doppio", Basic realm="doppio", charset="UTF-8"`

// Authenticator verifies the credentials of requests and logs users in.
// Safe for concurrent use.
type Authenticator struct {
	users *Store
	cfg   Config
	limit *limiter
	// cacheKey keys the digests Basic credentials are remembered by, so
	// the cache holds nothing a reader of memory could test passwords
	// against offline.
	cacheKey []byte

	mu    sync.Mutex
	basic map[[sha256.Size]byte]basicEntry
	// tokens remembers tokens whose signature verified, so a session's
	// later requests skip the parse and the HMAC; expiry and the user's
	// generation are still checked on every request.
	tokens map[string]token

	refusals *prometheus.CounterVec
}

type basicEntry struct {
	user       string
	generation uint64
}

// New returns an Authenticator over users.
func New(users *Store, cfg Config) *Authenticator {
	if cfg.TokenLifetime <= 0 {
		cfg.TokenLifetime = time.Hour
	}
	if cfg.LoginRate <= 0 {
		cfg.LoginRate = 1
	}
	if cfg.LoginBurst <= 0 {
		cfg.LoginBurst = 10
	}
	if cfg.BasicCacheSize <= 0 {
		cfg.BasicCacheSize = 4096
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	a := &Authenticator{
		users: users, cfg: cfg, limit: newLimiter(cfg.LoginRate, cfg.LoginBurst),
		cacheKey: make([]byte, 32), basic: map[[sha256.Size]byte]basicEntry{},
		tokens: map[string]token{},
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "doppio_auth_refusals_total", Help: "Requests refused by authentication (401, 429, 503) or authorization (403), by reason.",
		}, []string{"reason"}),
	}
	_, _ = rand.Read(a.cacheKey)
	if cfg.Registerer != nil {
		hashes := prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "doppio_auth_password_hashes_total", Help: "Slow password hashes computed (logins, Basic credentials not yet remembered, password changes).",
		}, func() float64 { return float64(users.Hashes()) })
		cfg.Registerer.MustRegister(a.refusals, hashes)
	}
	return a
}

// Users is the store of users the authenticator reads.
func (a *Authenticator) Users() *Store { return a.users }

// refuse counts and returns a refusal of kind k.
func (a *Authenticator) refuse(reason string, k problem.Kind, format string, args ...any) *Refusal {
	a.refusals.WithLabelValues(reason).Inc()
	return &Refusal{Reason: reason, Problem: problem.New(k, format, args...)}
}

// Authenticate returns who sent r: the user of its Authorization header
// (Bearer or Basic) when it has one, else of its verified TLS client
// certificate. It never returns a Caller with Node set. Every error is a
// *Refusal.
func (a *Authenticator) Authenticate(r *http.Request) (Caller, error) {
	if err := a.users.fresh(); err != nil {
		pe, _ := problem.As(err)
		a.refusals.WithLabelValues(ReasonStale).Inc()
		return Caller{}, &Refusal{Reason: ReasonStale, Problem: pe}
	}
	header := r.Header.Get("Authorization")
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 && header == "" {
		cn := r.TLS.VerifiedChains[0][0].Subject.CommonName
		if cn == certs.NodeCommonName {
			return Caller{}, a.refuse(ReasonNodeCert, problem.Unauthenticated, "a node certificate authenticates no user")
		}
		if _, ok := a.users.lookup(cn); !ok {
			return Caller{}, a.refuse(ReasonUnknownUser, problem.Unauthenticated, "the client certificate names no user (%q)", cn)
		}
		return Caller{User: cn}, nil
	}
	if header == "" {
		return Caller{}, a.refuse(ReasonNone, problem.Unauthenticated, "this node requires authentication: a client certificate, a Bearer token from POST /_auth/login, or Basic credentials")
	}
	scheme, cred, ok := ParseAuthorization(header)
	if !ok {
		return Caller{}, a.refuse(ReasonMalformed, problem.Unauthenticated, "the Authorization header is neither \"Bearer TOKEN\" nor \"Basic BASE64(user:password)\"")
	}
	switch scheme {
	case "bearer":
		return a.bearer(cred)
	default:
		user, pw, ok := ParseBasic(cred)
		if !ok {
			return Caller{}, a.refuse(ReasonMalformed, problem.Unauthenticated, "the Basic credentials are not base64 of user:password")
		}
		return a.basicAuth(r.Context(), user, pw, ClientAddr(r))
	}
}

// ParseAuthorization splits an Authorization header value into its
// scheme, lower-cased ("bearer" or "basic", the only ones accepted), and
// its credentials.
func ParseAuthorization(h string) (scheme, cred string, ok bool) {
	s, c, found := strings.Cut(h, " ")
	if !found {
		return "", "", false
	}
	s = strings.ToLower(s)
	c = strings.TrimLeft(c, " ")
	if (s != "bearer" && s != "basic") || c == "" || strings.ContainsAny(c, " \t") {
		return "", "", false
	}
	return s, c, true
}

// ParseBasic decodes Basic credentials: base64 of "user:password".
func ParseBasic(cred string) (user, password string, ok bool) {
	b, err := base64.StdEncoding.DecodeString(cred)
	if err != nil {
		return "", "", false
	}
	user, password, ok = strings.Cut(string(b), ":")
	return user, password, ok && user != ""
}

func (a *Authenticator) bearer(s string) (Caller, error) {
	a.mu.Lock()
	t, hit := a.tokens[s]
	a.mu.Unlock()
	if !hit {
		var err error
		if t, err = parseToken(a.users.key, s); err != nil {
			return Caller{}, a.refuse(ReasonBadToken, problem.Unauthenticated, "%s", err)
		}
		a.mu.Lock()
		if len(a.tokens) >= a.cfg.BasicCacheSize {
			for k := range a.tokens { // any one: map order is random
				delete(a.tokens, k)
				break
			}
		}
		a.tokens[s] = t
		a.mu.Unlock()
	}
	if !a.cfg.Now().Before(t.expires) {
		return Caller{}, a.refuse(ReasonExpired, problem.Unauthenticated, "session token expired at %s; log in again", t.expires.UTC().Format(time.RFC3339))
	}
	rec, ok := a.users.lookup(t.user)
	if !ok || rec.Hash == "" || rec.Generation != t.generation {
		return Caller{}, a.refuse(ReasonRevoked, problem.Unauthenticated, "session token revoked: its user was deleted or changed password; log in again")
	}
	return Caller{User: t.user}, nil
}

// basicAuth verifies a Basic credential, with the slow hash only when it
// is not remembered at the user's current credential generation.
func (a *Authenticator) basicAuth(ctx context.Context, user, pw, addr string) (Caller, error) {
	digest := a.digest(user, pw)
	a.mu.Lock()
	e, hit := a.basic[digest]
	a.mu.Unlock()
	if hit {
		if rec, ok := a.users.lookup(user); ok && rec.Hash != "" && rec.Generation == e.generation {
			return Caller{User: user}, nil
		}
		a.mu.Lock()
		delete(a.basic, digest)
		a.mu.Unlock()
	}
	gen, err := a.checkPassword(ctx, user, pw, addr)
	if err != nil {
		return Caller{}, err
	}
	a.mu.Lock()
	if len(a.basic) >= a.cfg.BasicCacheSize {
		for k := range a.basic { // any one: map order is random
			delete(a.basic, k)
			break
		}
	}
	a.basic[digest] = basicEntry{user: user, generation: gen}
	a.mu.Unlock()
	return Caller{User: user}, nil
}

func (a *Authenticator) digest(user, pw string) [sha256.Size]byte {
	m := hmac.New(sha256.New, a.cacheKey)
	m.Write([]byte(user))
	m.Write([]byte{0})
	m.Write([]byte(pw))
	var d [sha256.Size]byte
	m.Sum(d[:0])
	return d
}

// checkPassword rate-limits, then verifies pw with the slow hash; it
// returns the credential generation it verified at.
func (a *Authenticator) checkPassword(ctx context.Context, user, pw, addr string) (uint64, error) {
	if wait := a.limit.take(a.cfg.Now(), "user:"+user, "addr:"+addr); wait > 0 {
		r := a.refuse(ReasonRateLimited, problem.TooManyRequests, "too many password attempts for user %q or from %s; retry later", user, addr)
		r.Problem.RetryAfter = int(math.Ceil(wait.Seconds()))
		return 0, r
	}
	rec, ok := a.users.lookup(user)
	if !ok {
		return 0, a.refuse(ReasonUnknownUser, problem.Unauthenticated, "wrong user name or password")
	}
	if rec.Hash == "" {
		return 0, a.refuse(ReasonNoPassword, problem.Unauthenticated, "wrong user name or password")
	}
	good, err := a.users.verify(ctx, rec.Hash, pw)
	if err != nil {
		if errors.Is(err, errBadHash) {
			return 0, a.refuse(ReasonWrongPassword, problem.Unauthenticated, "wrong user name or password")
		}
		return 0, err
	}
	if !good {
		return 0, a.refuse(ReasonWrongPassword, problem.Unauthenticated, "wrong user name or password")
	}
	return rec.Generation, nil
}

// Login verifies user's password, sent from addr, and returns a session
// token valid until expires.
func (a *Authenticator) Login(ctx context.Context, user, password, addr string) (tok string, expires time.Time, err error) {
	gen, err := a.checkPassword(ctx, user, password, addr)
	if err != nil {
		return "", time.Time{}, err
	}
	expires = a.cfg.Now().Add(a.cfg.TokenLifetime).Truncate(time.Second)
	return signToken(a.users.key, token{user: user, generation: gen, expires: expires}), expires, nil
}

// Authorize returns nil when c may use a route needing p on db, else a
// *Refusal: 403 for a known user, 401 for nobody.
func (a *Authenticator) Authorize(c Caller, p Privilege, db string) error {
	grants, _ := a.users.Grants(c.User)
	if Allows(c, grants, p, db) {
		return nil
	}
	if c.User == "" && !c.Node {
		return a.refuse(ReasonNone, problem.Unauthenticated, "this route requires authentication")
	}
	where := ""
	if p.PerDatabase() {
		where = " on database " + db
	}
	return a.refuse(ReasonForbidden, problem.Forbidden, "user %q lacks the %s privilege%s", c.User, p, where)
}

// ClientAddr is the host r came from, as rate limits and the audit log
// name it.
func ClientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
