package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"
)

// tokenPrefix versions the session token format (see the package doc).
const tokenPrefix = "dpt1."

// keyBytes is the length of the token signing key.
const keyBytes = 32

// token is a session token's signed content.
type token struct {
	user       string
	generation uint64
	expires    time.Time // whole seconds
}

// errToken is every reason a token string is refused before its user is
// looked up: malformed, forged, tampered, signed by another key.
var errToken = errors.New("session token is malformed or its signature does not verify")

// signToken renders t signed with key.
func signToken(key []byte, t token) string {
	body := tokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(t.user)) + "." +
		strconv.FormatUint(t.generation, 10) + "." + strconv.FormatInt(t.expires.Unix(), 10)
	return body + "." + base64.RawURLEncoding.EncodeToString(tokenMAC(key, body))
}

func tokenMAC(key []byte, body string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(body))
	return m.Sum(nil)
}

// parseToken checks s's form and signature and returns its content; it
// does not check the expiry nor the user. Every field has exactly one
// spelling, so no two strings carry the same signed content.
func parseToken(key []byte, s string) (token, error) {
	rest, ok := strings.CutPrefix(s, tokenPrefix)
	if !ok {
		return token{}, errToken
	}
	f := strings.Split(rest, ".")
	if len(f) != 4 {
		return token{}, errToken
	}
	mac, ok := decodeCanonical(f[3])
	if !ok || !hmac.Equal(mac, tokenMAC(key, s[:len(s)-len(f[3])-1])) {
		return token{}, errToken
	}
	user, ok := decodeCanonical(f[0])
	if !ok || len(user) == 0 {
		return token{}, errToken
	}
	gen, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil || strconv.FormatUint(gen, 10) != f[1] {
		return token{}, errToken
	}
	exp, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || strconv.FormatInt(exp, 10) != f[2] {
		return token{}, errToken
	}
	return token{user: string(user), generation: gen, expires: time.Unix(exp, 0)}, nil
}

// decodeCanonical decodes unpadded base64url and accepts only the one
// spelling the encoder produces: the decoder alone skips CR and LF, which
// would let several strings carry one signature.
func decodeCanonical(s string) ([]byte, bool) {
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || base64.RawURLEncoding.EncodeToString(b) != s {
		return nil, false
	}
	return b, true
}
