package money

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// maxExponent bounds the exponent of a number's text. Any non-zero value
// whose exponent lies beyond it is either far too large or far too small for
// an amount, and saying so early keeps every position below within an int.
const maxExponent = 10_000

// decimal is the exact value of a JSON number's text: the digits with the
// decimal point placed after the first point digits (point may be negative
// or beyond len(digits)). digits has neither leading nor trailing zeros, and
// "" is zero (never negative).
type decimal struct {
	neg    bool
	digits string
	point  int
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// parseDecimal reads text by the JSON number grammar
// (-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?), exactly, with no float.
func parseDecimal(text string) (decimal, error) {
	s := text
	bad := func() (decimal, error) {
		return decimal{}, fmt.Errorf("%w: %q is not a JSON number", ErrSyntax, text)
	}
	var d decimal
	i := 0
	if i < len(s) && s[i] == '-' {
		d.neg = true
		i++
	}
	start := i
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && '1' <= s[i] && s[i] <= '9':
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	default:
		return bad()
	}
	intPart := s[start:i]
	frac := ""
	if i < len(s) && s[i] == '.' {
		i++
		fs := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == fs {
			return bad()
		}
		frac = s[fs:i]
	}
	exp := 0
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		expNeg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			expNeg = s[i] == '-'
			i++
		}
		es := i
		for i < len(s) && isDigit(s[i]) {
			if exp <= maxExponent {
				exp = exp*10 + int(s[i]-'0')
			}
			i++
		}
		if i == es {
			return bad()
		}
		if exp > maxExponent {
			exp = maxExponent + 1
		}
		if expNeg {
			exp = -exp
		}
	}
	if i != len(s) {
		return bad()
	}
	all := intPart + frac
	d.point = len(intPart) + exp
	trimmed := strings.TrimLeft(all, "0")
	d.point -= len(all) - len(trimmed)
	d.digits = strings.TrimRight(trimmed, "0")
	if d.digits == "" {
		return decimal{}, nil
	}
	return d, nil
}

func (d decimal) isZero() bool { return d.digits == "" }

// fracDigits is how many decimal places the value needs (0 for an integer).
func (d decimal) fracDigits() int {
	return max(0, len(d.digits)-d.point)
}

// scaled returns |value| × 10^scale as an int64, exactly, or
// ErrTooManyDecimals when that is not an integer, or ErrOverflow when it
// does not fit.
func (d decimal) scaled(scale int) (int64, error) {
	if d.isZero() {
		return 0, nil
	}
	if f := d.fracDigits(); f > scale {
		return 0, fmt.Errorf("%w: %d decimal places, at most %d allowed", ErrTooManyDecimals, f, scale)
	}
	q := d.point + scale // digits of the integer; digits[0] is not 0
	if q > 19 {
		return 0, ErrOverflow
	}
	n, err := strconv.ParseInt(d.digits+strings.Repeat("0", q-len(d.digits)), 10, 64)
	if err != nil {
		return 0, ErrOverflow
	}
	return n, nil
}

// formatScaled writes n / 10^scale with exactly scale decimals.
func formatScaled(n int64, scale int) string {
	neg := n < 0
	abs := uint64(n)
	if neg {
		abs = -abs // two's complement: right for math.MinInt64 too
	}
	s := strconv.FormatUint(abs, 10)
	if scale > 0 {
		if len(s) <= scale {
			s = strings.Repeat("0", scale-len(s)+1) + s
		}
		s = s[:len(s)-scale] + "." + s[len(s)-scale:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

// mulDivHalfUp returns round_half_up(a × b / c) for non-negative a and b
// and positive c. The product is formed in 128 bits, so it never overflows;
// only a quotient beyond int64 is ErrOverflow (never the case when b ≤ c,
// which is how every caller here uses it).
func mulDivHalfUp(a, b, c int64) (int64, error) {
	if a < 0 || b < 0 || c <= 0 {
		return 0, fmt.Errorf("mulDivHalfUp(%d, %d, %d): operands out of range", a, b, c)
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return 0, ErrOverflow
	}
	q, r := bits.Div64(hi, lo, uint64(c))
	if r >= uint64(c)-r { // r/c >= 1/2
		q++
	}
	if q > math.MaxInt64 {
		return 0, ErrOverflow
	}
	return int64(q), nil
}

// addNonNeg adds two non-negative int64s, reporting overflow.
func addNonNeg(a, b int64) (int64, error) {
	if a > math.MaxInt64-b {
		return 0, ErrOverflow
	}
	return a + b, nil
}

// pow10 returns 10^n for 0 <= n <= 18.
func pow10(n int) int64 {
	p := int64(1)
	for range n {
		p *= 10
	}
	return p
}
