// Package e2e runs the built doppio binary as a user would: real processes,
// real sockets, real kill -9. With DOPPIO_E2E_SECURE=1 the harness runs
// every process it starts in secure mode (TLS and authentication, one
// certs directory per run) and makes every request as root by its client
// certificate; `make test` runs the cluster tests so as well.
package e2e
