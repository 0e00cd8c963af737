package pg

import (
	"context"
	"errors"
	"io"
	"net"

	"github.com/jackc/pgx/v5/pgconn"
)

// SQLSTATE codes classified here. See
// https://www.postgresql.org/docs/current/errcodes-appendix.html.
const (
	CodeUniqueViolation      = "23505"
	CodeForeignKeyViolation  = "23503"
	CodeCheckViolation       = "23514"
	CodeNotNullViolation     = "23502"
	CodeSerializationFailure = "40001"
	CodeDeadlockDetected     = "40P01"
	CodeQueryCanceled        = "57014" // statement_timeout, pg_cancel_backend
	CodeLockNotAvailable     = "55P03" // lock_timeout, NOWAIT
	CodeReadOnlyTransaction  = "25006" // a standby, or a primary during failover
	CodeAdminShutdown        = "57P01"
	CodeCrashShutdown        = "57P02"
	CodeCannotConnectNow     = "57P03"
)

// Code returns the SQLSTATE of the Postgres error wrapped in err, or "" when
// err does not come from the server.
func Code(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// IsUniqueViolation reports a unique or primary-key constraint violation.
func IsUniqueViolation(err error) bool { return Code(err) == CodeUniqueViolation }

// IsForeignKeyViolation reports a foreign-key constraint violation.
func IsForeignKeyViolation(err error) bool { return Code(err) == CodeForeignKeyViolation }

// IsCheckViolation reports a CHECK constraint violation.
func IsCheckViolation(err error) bool { return Code(err) == CodeCheckViolation }

// IsNotNullViolation reports a NOT NULL constraint violation.
func IsNotNullViolation(err error) bool { return Code(err) == CodeNotNullViolation }

// IsRetryable reports errors that a transaction retry can cure: a
// serialization failure or a deadlock.
func IsRetryable(err error) bool {
	c := Code(err)
	return c == CodeSerializationFailure || c == CodeDeadlockDetected
}

// ConstraintName returns the name of the violated constraint, or "" when err
// is not a constraint violation. Stores use it to tell which unique key was
// hit (e.g. duplicate email vs duplicate code).
func ConstraintName(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.ConstraintName
	}
	return ""
}

// IsConnectionError reports that the database could not be reached or the
// connection broke: a failed connect, a network error, an unexpected EOF, a
// connection the driver has closed (pgconn.ErrConnClosed),
// SQLSTATE class 08 (connection exception) or a server shutting down or
// starting (57P01, 57P02, 57P03). Nothing about the statement is at fault;
// the same work succeeds once the server is back. Context cancellation and
// deadlines are not connection errors.
func IsConnectionError(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if code := Code(err); code != "" {
		return len(code) == 5 && code[:2] == "08" ||
			code == CodeAdminShutdown || code == CodeCrashShutdown || code == CodeCannotConnectNow
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		return true
	}
	// ErrConnClosed: a statement on a connection the driver had already
	// closed (a previous statement on it found the server gone).
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, pgconn.ErrConnClosed) {
		return true
	}
	if pgconn.Timeout(err) {
		return true
	}
	var netErr net.Error
	return errors.As(err, &netErr)
}

// IsTransient reports failures of the moment rather than of the work: a
// connection error (IsConnectionError), a retryable transaction conflict
// (IsRetryable: 40001, 40P01), a statement cancelled by a timeout (57014),
// a lock not obtained in time (55P03), a read-only transaction during a
// failover (25006), or insufficient resources (class 53: out of
// connections, memory or disk). Retried later, with backoff, the same work
// can succeed; a consumer must not dead-letter an event for one of these.
// Context cancellation is not transient: the caller is giving up.
func IsTransient(err error) bool {
	if IsConnectionError(err) || IsRetryable(err) {
		return true
	}
	switch code := Code(err); {
	case code == CodeQueryCanceled, code == CodeLockNotAvailable, code == CodeReadOnlyTransaction:
		return true
	case len(code) == 5 && code[:2] == "53":
		return true
	}
	return false
}
