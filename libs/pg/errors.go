package pg

import (
	"errors"

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
