package main

import (
	"context"
	"errors"
	"net"
	"strings"
	"syscall"

	"github.com/doppio-db/doppio/client"
	"github.com/spf13/cobra"
)

// The exit codes a script can tell apart (docs/reference/cli.md lists
// them); exitFailure is any other failure.
const (
	exitOK           = 0
	exitFailure      = 1
	exitUsage        = 2 // the command line is wrong: nothing was sent
	exitNotFound     = 3 // a database, table, document or named object is absent
	exitConflict     = 4 // a conflict, or a condition (--if-match…) was false
	exitUnavailable  = 5 // unreachable, unavailable, timed out, or outcome unknown
	exitInconsistent = 6 // doppio check found replicas that differ
)

// exitCodes is the table docs/reference/cli.md prints.
var exitCodes = []struct {
	code int
	what string
}{
	{exitOK, "success"},
	{exitFailure, "any other failure (a malformed request the server refused, a permission denied, …)"},
	{exitUsage, "usage error: an unknown command or flag, a wrong number of arguments, a malformed argument; nothing was sent"},
	{exitNotFound, "not found: the database, table, document, datastream, user or quota does not exist"},
	{exitConflict, "conflict or precondition failed: an incompatible change, a duplicate, or a false --if-match/--if-none-match"},
	{exitUnavailable, "unavailable: the server could not be reached or served nothing within --retry, a timeout, or a write whose outcome is unknown (read before retrying it)"},
	{exitInconsistent, "inconsistency: `doppio check` found replicas that differ and left them so"},
}

// usageError marks an error of the command line.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// errInconsistent is wrapped by `doppio check` when replicas differ.
var errInconsistent = errors.New("replicas are inconsistent")

// cobraUsage are the prefixes of the usage errors cobra makes itself
// without a hook to mark them (the root's unknown command, required and
// grouped flags).
var cobraUsage = []string{"unknown command ", "required flag(s) ", "if any flags in the group ", "at least one of the flags in the group "}

// exitCode is the process's exit status for the error a command returned.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var ue usageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	for _, p := range cobraUsage {
		if strings.HasPrefix(err.Error(), p) {
			return exitUsage
		}
	}
	var ne net.Error
	switch {
	case errors.Is(err, errInconsistent):
		return exitInconsistent
	case errors.Is(err, client.ErrNotFound):
		return exitNotFound
	case errors.Is(err, client.ErrConflict), errors.Is(err, client.ErrPreconditionFailed):
		return exitConflict
	case errors.Is(err, client.ErrUnavailable), errors.Is(err, client.ErrOutcomeUnknown),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, syscall.ECONNREFUSED),
		errors.As(err, &ne) && ne.Timeout():
		return exitUnavailable
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" {
		return exitUnavailable // no route, unknown host: not reachable either
	}
	return exitFailure
}

// markUsageErrors makes the flag and argument errors of root and every
// command under it usage errors, for exitCode.
func markUsageErrors(root *cobra.Command) {
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if args := c.Args; args != nil {
			c.Args = func(cmd *cobra.Command, a []string) error {
				if err := args(cmd, a); err != nil {
					return usageError{err}
				}
				return nil
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}
