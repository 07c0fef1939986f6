package auth

import (
	"strings"
	"testing"
)

var cheap = HashParams{Time: 1, MemoryKiB: 64, Threads: 1}

func TestPasswordHashVerifiesOnlyItsPassword(t *testing.T) {
	h, err := hashPassword("correct horse", cheap)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h, "$argon2id$v=19$m=64,t=1,p=1$") {
		t.Fatalf("hash %q is not an argon2id PHC string with its parameters", h)
	}
	for pw, want := range map[string]bool{"correct horse": true, "correct hors": false, "correct horse ": false, "": false} {
		got, err := verifyPassword(h, pw)
		if err != nil || got != want {
			t.Errorf("verify(%q) = %v, %v; want %v", pw, got, err, want)
		}
	}
}

func TestPasswordHashesAreSalted(t *testing.T) {
	a, _ := hashPassword("same password", cheap)
	b, _ := hashPassword("same password", cheap)
	if a == b {
		t.Fatalf("two hashes of one password are equal: %q", a)
	}
}

func TestDefaultHashParamsAreRFC9106s(t *testing.T) {
	if DefaultHashParams != (HashParams{Time: 3, MemoryKiB: 65536, Threads: 4}) {
		t.Fatalf("DefaultHashParams = %+v", DefaultHashParams)
	}
}

func TestParseHashRefusesWhatItDidNotWrite(t *testing.T) {
	good, _ := hashPassword("password1", cheap)
	f := strings.Split(good, "$")
	for _, bad := range []string{
		"", "plain", "$argon2i$v=19$m=64,t=1,p=1$" + f[4] + "$" + f[5],
		"$argon2id$v=16$m=64,t=1,p=1$" + f[4] + "$" + f[5],
		"$argon2id$v=19$m=64,t=0,p=1$" + f[4] + "$" + f[5],
		"$argon2id$v=19$m=4,t=1,p=1$" + f[4] + "$" + f[5],
		"$argon2id$v=19$m=64,t=1,p=1,x=2$" + f[4] + "$" + f[5],
		"$argon2id$v=19$m=64,t=1,p=1$$" + f[5],
		"$argon2id$v=19$m=64,t=1,p=1$" + f[4] + "$!",
		"$argon2id$v=19$m=99999999,t=1,p=1$" + f[4] + "$" + f[5],
	} {
		if _, err := verifyPassword(bad, "password1"); err != errBadHash {
			t.Errorf("verify against %q: %v, want errBadHash", bad, err)
		}
	}
}

func TestValidPasswordBounds(t *testing.T) {
	if validPassword("1234567") == nil || validPassword(strings.Repeat("x", 1025)) == nil {
		t.Fatal("a 7-byte or a 1025-byte password was accepted")
	}
	if err := validPassword("12345678"); err != nil {
		t.Fatal(err)
	}
}
