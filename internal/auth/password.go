package auth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/crypto/argon2"
)

// HashParams are argon2id's cost parameters.
type HashParams struct {
	// Time is the number of passes over the memory.
	Time uint32
	// MemoryKiB is the memory used, in KiB.
	MemoryKiB uint32
	// Threads is the number of lanes.
	Threads uint8
}

// DefaultHashParams are RFC 9106's second recommended option: 3 passes
// over 64 MiB with 4 lanes.
var DefaultHashParams = HashParams{Time: 3, MemoryKiB: 64 << 10, Threads: 4}

const (
	saltBytes = 16
	tagBytes  = 32
	// maxPasswordBytes keeps a password's cost independent of its length
	// and a request's body small.
	maxPasswordBytes = 1024
	// MinPasswordBytes is the shortest password accepted.
	MinPasswordBytes = 8
)

// validPassword reports why pw cannot be a password, or nil.
func validPassword(pw string) error {
	if len(pw) < MinPasswordBytes {
		return fmt.Errorf("password must be at least %d bytes long", MinPasswordBytes)
	}
	if len(pw) > maxPasswordBytes {
		return fmt.Errorf("password must be at most %d bytes long", maxPasswordBytes)
	}
	return nil
}

// hashPassword returns pw's argon2id hash in the PHC string format
// ($argon2id$v=19$m=…,t=…,p=…$salt$tag), with a fresh random salt.
func hashPassword(pw string, p HashParams) (string, error) {
	salt := make([]byte, saltBytes)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	tag := argon2.IDKey([]byte(pw), salt, p.Time, p.MemoryKiB, p.Threads, tagBytes)
	enc := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, p.MemoryKiB, p.Time, p.Threads, enc.EncodeToString(salt), enc.EncodeToString(tag)), nil
}

// errBadHash: a stored hash this package did not write.
var errBadHash = errors.New("auth: stored password hash is not an argon2id PHC string")

// parseHash splits a PHC string written by hashPassword.
func parseHash(s string) (p HashParams, salt, tag []byte, err error) {
	f := strings.Split(s, "$")
	if len(f) != 6 || f[0] != "" || f[1] != "argon2id" || f[2] != "v="+strconv.Itoa(argon2.Version) {
		return p, nil, nil, errBadHash
	}
	var m, t, th uint64
	for _, kv := range strings.Split(f[3], ",") {
		k, v, _ := strings.Cut(kv, "=")
		n, perr := strconv.ParseUint(v, 10, 32)
		if perr != nil {
			return p, nil, nil, errBadHash
		}
		switch k {
		case "m":
			m = n
		case "t":
			t = n
		case "p":
			th = n
		default:
			return p, nil, nil, errBadHash
		}
	}
	if t < 1 || th < 1 || th > 255 || m < 8*th || m > 4<<20 {
		return p, nil, nil, errBadHash
	}
	enc := base64.RawStdEncoding
	if salt, err = enc.DecodeString(f[4]); err != nil || len(salt) == 0 {
		return p, nil, nil, errBadHash
	}
	if tag, err = enc.DecodeString(f[5]); err != nil || len(tag) == 0 {
		return p, nil, nil, errBadHash
	}
	return HashParams{Time: uint32(t), MemoryKiB: uint32(m), Threads: uint8(th)}, salt, tag, nil
}

// verifyPassword reports whether pw matches the stored hash, comparing in
// constant time.
func verifyPassword(stored, pw string) (bool, error) {
	p, salt, tag, err := parseHash(stored)
	if err != nil {
		return false, err
	}
	got := argon2.IDKey([]byte(pw), salt, p.Time, p.MemoryKiB, p.Threads, uint32(len(tag)))
	return subtle.ConstantTimeCompare(got, tag) == 1, nil
}
