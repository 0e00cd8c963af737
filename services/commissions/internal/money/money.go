package money

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Errors of this package. Callers map them to their own error kinds (an
// invalid request, or an inconsistent record, which is an internal error).
var (
	// ErrUnsupportedCurrency: a currency other than USD, EUR and VND.
	ErrUnsupportedCurrency = errors.New("unsupported currency")
	// ErrCurrencyMismatch: amounts of different currencies combined.
	ErrCurrencyMismatch = errors.New("currency mismatch")
	// ErrSyntax: a text that is not a JSON number.
	ErrSyntax = errors.New("invalid number")
	// ErrTooManyDecimals: a value with more decimal places than its
	// currency (or a rate) allows. Nothing is ever rounded silently.
	ErrTooManyDecimals = errors.New("too many decimals")
	// ErrOverflow: a value beyond the int64 range of minor units.
	ErrOverflow = errors.New("amount out of range")
	// ErrNegative: a negative value where only zero or more makes sense.
	ErrNegative = errors.New("negative amount")
	// ErrZero: zero where a positive value is required.
	ErrZero = errors.New("amount must be positive")
	// ErrInvalid: an input struct that breaks a precondition (negative
	// counts, a refunded total beyond the sale, an unknown status...).
	ErrInvalid = errors.New("invalid money input")
)

// Currency is an ISO 4217 code of a supported currency, in upper case.
type Currency string

// The supported currencies (the sale route's list).
const (
	USD Currency = "USD"
	EUR Currency = "EUR"
	VND Currency = "VND"
)

// ParseCurrency reads a currency code case-insensitively ("usd" is USD), as
// the tracking service's sale route does. There is no default: an empty or
// unknown code, or one with surrounding spaces, is ErrUnsupportedCurrency.
func ParseCurrency(code string) (Currency, error) {
	c := Currency(strings.ToUpper(code))
	if !c.Valid() {
		return "", fmt.Errorf("%w: %q (supported: USD, EUR, VND)", ErrUnsupportedCurrency, code)
	}
	return c, nil
}

// Valid reports whether c is one of the supported currencies.
func (c Currency) Valid() bool {
	switch c {
	case USD, EUR, VND:
		return true
	}
	return false
}

// Decimals is the number of minor-unit digits: 2 for USD and EUR (cents),
// 0 for VND (the dong has no minor unit in use). It is 0 for an invalid
// currency; validate first.
func (c Currency) Decimals() int {
	switch c {
	case USD, EUR:
		return 2
	}
	return 0
}

// Amount is money: an integer count of the currency's minor units.
type Amount struct {
	Minor    int64
	Currency Currency
}

// New returns minor units of c, checking c.
func New(minor int64, c Currency) (Amount, error) {
	if !c.Valid() {
		return Amount{}, fmt.Errorf("%w: %q", ErrUnsupportedCurrency, string(c))
	}
	return Amount{Minor: minor, Currency: c}, nil
}

// IsZero reports whether a is zero minor units.
func (a Amount) IsZero() bool { return a.Minor == 0 }

// Major formats a in major units with exactly the currency's decimals:
// 250 USD is "2.50", 5 EUR "0.05", -250 USD "-2.50", 1000 VND "1000".
func (a Amount) Major() string { return formatScaled(a.Minor, a.Currency.Decimals()) }

// Number is Major as a json.Number, for a response that answers major units.
func (a Amount) Number() json.Number { return json.Number(a.Major()) }

// String is "2.50 USD".
func (a Amount) String() string { return a.Major() + " " + string(a.Currency) }

// ParseMajor converts the text of a JSON number in major units of c (such
// as a json.Number's) to minor units, exactly: "2.5" USD is 250, "2.500"
// USD 250, "25e-1" USD 250, "1000" VND 1000. It never goes through a float.
//
//   - More decimal places than c has (after dropping trailing zeros:
//     "2.505" USD, "1000.5" VND) is ErrTooManyDecimals, never rounded.
//   - A negative value is ErrNegative ("-0" is zero); zero is accepted
//     (use ParsePositiveMajor where it is not).
//   - More minor units than an int64 holds is ErrOverflow.
//   - Text outside the JSON number grammar (spaces, "+1", ".5", "1.",
//     "01", "NaN") is ErrSyntax.
func ParseMajor(text string, c Currency) (Amount, error) {
	if !c.Valid() {
		return Amount{}, fmt.Errorf("%w: %q", ErrUnsupportedCurrency, string(c))
	}
	d, err := parseDecimal(text)
	if err != nil {
		return Amount{}, err
	}
	if d.neg {
		return Amount{}, fmt.Errorf("%w: %s", ErrNegative, text)
	}
	n, err := d.scaled(c.Decimals())
	if err != nil {
		return Amount{}, fmt.Errorf("%s %s: %w", text, c, err)
	}
	return Amount{Minor: n, Currency: c}, nil
}

// ParsePositiveMajor is ParseMajor refusing zero with ErrZero.
func ParsePositiveMajor(text string, c Currency) (Amount, error) {
	a, err := ParseMajor(text, c)
	if err != nil {
		return Amount{}, err
	}
	if a.Minor == 0 {
		return Amount{}, fmt.Errorf("%w: %s", ErrZero, text)
	}
	return a, nil
}
