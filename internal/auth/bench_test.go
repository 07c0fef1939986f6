package auth

import (
	"context"
	"testing"
)

// BenchmarkAuthenticateBearer is a request's cost of authentication and
// authorization with a session token: what every secure request pays.
func BenchmarkAuthenticateBearer(b *testing.B) {
	cli := startEtcd(b)
	s, err := OpenStore(context.Background(), cli, prefix, StoreOptions{Hash: cheap})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Put(ctx, "bob", ptr("bob password")); err != nil {
		b.Fatal(err)
	}
	if _, err := s.AddGrant(ctx, "bob", Grant{Role: RoleReadWrite, DB: "A"}); err != nil {
		b.Fatal(err)
	}
	a := New(s, Config{})
	tok, _, err := a.Login(ctx, "bob", "bob password", "127.0.0.1")
	if err != nil {
		b.Fatal(err)
	}
	r := request("Bearer " + tok)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		c, err := a.Authenticate(r)
		if err != nil {
			b.Fatal(err)
		}
		if err := a.Authorize(c, Read, "A"); err != nil {
			b.Fatal(err)
		}
	}
}
