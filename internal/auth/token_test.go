package auth

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

var (
	key1 = []byte("0123456789abcdef0123456789abcdef")
	key2 = []byte("fedcba9876543210fedcba9876543210")
)

func TestTokenRoundTrips(t *testing.T) {
	in := token{user: "alice", generation: 1<<63 + 5, expires: time.Unix(1900000000, 0)}
	s := signToken(key1, in)
	out, err := parseToken(key1, s)
	if err != nil || out.user != in.user || out.generation != in.generation || !out.expires.Equal(in.expires) {
		t.Fatalf("parse(sign(%+v)) = %+v, %v", in, out, err)
	}
}

func TestTokenRefusesForgedAndTampered(t *testing.T) {
	s := signToken(key1, token{user: "alice", generation: 7, expires: time.Unix(1900000000, 0)})
	f := strings.Split(strings.TrimPrefix(s, tokenPrefix), ".")
	bob := base64.RawURLEncoding.EncodeToString([]byte("bob"))
	cases := map[string]string{
		"another key":       signToken(key2, token{user: "alice", generation: 7, expires: time.Unix(1900000000, 0)}),
		"other user":        tokenPrefix + bob + "." + f[1] + "." + f[2] + "." + f[3],
		"other generation":  tokenPrefix + f[0] + ".8." + f[2] + "." + f[3],
		"later expiry":      tokenPrefix + f[0] + "." + f[1] + ".1900000001." + f[3],
		"leading zero":      tokenPrefix + f[0] + ".07." + f[2] + "." + f[3],
		"signature cut":     s[:len(s)-1],
		"signature padded":  s + "=",
		"no prefix":         strings.TrimPrefix(s, tokenPrefix),
		"other version":     "dpt2." + strings.TrimPrefix(s, tokenPrefix),
		"extra field":       s + ".x",
		"empty":             "",
		"mac of empty user": signToken(key1, token{user: "", generation: 7, expires: time.Unix(1900000000, 0)}),
	}
	for name, bad := range cases {
		if _, err := parseToken(key1, bad); err != errToken {
			t.Errorf("%s: parse(%q) = %v, want errToken", name, bad, err)
		}
	}
}

func TestParseAuthorization(t *testing.T) {
	for _, c := range []struct {
		h, scheme, cred string
		ok              bool
	}{
		{"Bearer abc", "bearer", "abc", true},
		{"bearer  abc", "bearer", "abc", true},
		{"BASIC YTpi", "basic", "YTpi", true},
		{"Bearer", "", "", false},
		{"Bearer ", "", "", false},
		{"Bearer a b", "", "", false},
		{"Digest abc", "", "", false},
		{"", "", "", false},
	} {
		s, cr, ok := ParseAuthorization(c.h)
		if s != c.scheme || cr != c.cred || ok != c.ok {
			t.Errorf("ParseAuthorization(%q) = %q, %q, %v", c.h, s, cr, ok)
		}
	}
	for _, c := range []struct {
		cred, user, pw string
		ok             bool
	}{
		{base64.StdEncoding.EncodeToString([]byte("alice:pa:ss")), "alice", "pa:ss", true},
		{base64.StdEncoding.EncodeToString([]byte("alice")), "", "", false},
		{base64.StdEncoding.EncodeToString([]byte(":pw")), "", "", false},
		{"%%%", "", "", false},
	} {
		u, p, ok := ParseBasic(c.cred)
		if ok != c.ok || (ok && (u != c.user || p != c.pw)) {
			t.Errorf("ParseBasic(%q) = %q, %q, %v", c.cred, u, p, ok)
		}
	}
}

// FuzzCredentials holds the parsers of the Authorization header and of
// session tokens to their contracts on any input: no panic; a token that
// verifies is the one canonical spelling of its content, and no other
// key verifies it.
func FuzzCredentials(f *testing.F) {
	f.Add("Bearer " + signToken(key1, token{user: "alice", generation: 3, expires: time.Unix(1900000000, 0)}))
	f.Add("Basic " + base64.StdEncoding.EncodeToString([]byte("root:secret password")))
	f.Add("Bearer dpt1.YQ.1.2.x")
	// The decoder skips CR and LF; a token carrying one must not verify.
	tok := signToken(key1, token{user: "alice", generation: 3, expires: time.Unix(1900000000, 0)})
	f.Add("Bearer " + tok[:len(tok)-10] + "\r" + tok[len(tok)-10:])
	f.Add("basic")
	f.Fuzz(func(t *testing.T, h string) {
		scheme, cred, ok := ParseAuthorization(h)
		if !ok {
			return
		}
		switch scheme {
		case "basic":
			if u, _, ok := ParseBasic(cred); ok && u == "" {
				t.Fatalf("ParseBasic(%q) accepted an empty user", cred)
			}
		case "bearer":
			tok, err := parseToken(key1, cred)
			if err != nil {
				return
			}
			if again := signToken(key1, tok); again != cred {
				t.Fatalf("token %q verifies but re-signs as %q", cred, again)
			}
			if _, err := parseToken(key2, cred); err == nil {
				t.Fatalf("token %q verifies under two keys", cred)
			}
		default:
			t.Fatalf("scheme %q accepted", scheme)
		}
	})
}
