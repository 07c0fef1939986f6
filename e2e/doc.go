// Package e2e runs the built doppio binary as a user would: real processes,
// real sockets, real kill -9.
package e2e
