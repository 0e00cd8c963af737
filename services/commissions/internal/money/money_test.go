package money

import (
	"errors"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"testing"
)

func TestParseCurrency(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Currency
		dec  int
		err  bool
	}{
		{"USD", USD, 2, false},
		{"usd", USD, 2, false},
		{"Eur", EUR, 2, false},
		{"vnd", VND, 0, false},
		{"", "", 0, true},
		{"GBP", "", 0, true},
		{" USD", "", 0, true},
		{"USD ", "", 0, true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseCurrency(tc.in)
			if tc.err {
				if !errors.Is(err, ErrUnsupportedCurrency) {
					t.Fatalf("ParseCurrency(%q) error = %v, want ErrUnsupportedCurrency", tc.in, err)
				}
				return
			}
			if err != nil || got != tc.want || got.Decimals() != tc.dec {
				t.Fatalf("ParseCurrency(%q) = %q (%d decimals), %v; want %q (%d)", tc.in, got, got.Decimals(), err, tc.want, tc.dec)
			}
		})
	}
}

func TestParseMajor(t *testing.T) {
	for _, tc := range []struct {
		name string
		text string
		cur  Currency
		want int64
		err  error
	}{
		{"usd two decimals", "2.50", USD, 250, nil},
		{"usd one decimal", "2.5", USD, 250, nil},
		{"usd integer", "2", USD, 200, nil},
		{"usd trailing zeros beyond cents", "2.500", USD, 250, nil},
		{"usd one cent", "0.01", USD, 1, nil},
		{"usd zero", "0", USD, 0, nil},
		{"usd negative zero", "-0", USD, 0, nil},
		{"usd zero with decimals", "0.00", USD, 0, nil},
		{"usd exponent", "25e-1", USD, 250, nil},
		{"usd exponent upper", "1E2", USD, 10000, nil},
		{"usd exponent plus", "1.5e+1", USD, 1500, nil},
		{"usd three decimals", "2.505", USD, 0, ErrTooManyDecimals},
		{"usd sub cent", "0.001", USD, 0, ErrTooManyDecimals},
		{"usd sub cent exponent", "1e-3", USD, 0, ErrTooManyDecimals},
		{"usd huge negative exponent", "1e-99999999999", USD, 0, ErrTooManyDecimals},
		{"usd zero huge exponent", "0e99999999999", USD, 0, nil},
		{"eur", "19.99", EUR, 1999, nil},
		{"eur three decimals", "19.999", EUR, 0, ErrTooManyDecimals},
		{"vnd", "1000", VND, 1000, nil},
		{"vnd trailing zero decimal", "1000.0", VND, 1000, nil},
		{"vnd half", "1000.5", VND, 0, ErrTooManyDecimals},
		{"vnd exponent", "2.5e3", VND, 2500, nil},
		{"usd max", "92233720368547758.07", USD, math.MaxInt64, nil},
		{"usd max plus one cent", "92233720368547758.08", USD, 0, ErrOverflow},
		{"vnd max", "9223372036854775807", VND, math.MaxInt64, nil},
		{"vnd max plus one", "9223372036854775808", VND, 0, ErrOverflow},
		{"usd 1e20", "1e20", USD, 0, ErrOverflow},
		{"usd huge exponent", "1e99999999999", USD, 0, ErrOverflow},
		{"negative", "-1", USD, 0, ErrNegative},
		{"negative decimal", "-2.50", USD, 0, ErrNegative},
		{"empty", "", USD, 0, ErrSyntax},
		{"plus sign", "+1", USD, 0, ErrSyntax},
		{"leading dot", ".5", USD, 0, ErrSyntax},
		{"trailing dot", "1.", USD, 0, ErrSyntax},
		{"leading zero", "01", USD, 0, ErrSyntax},
		{"space", " 1", USD, 0, ErrSyntax},
		{"comma", "1,5", USD, 0, ErrSyntax},
		{"nan", "NaN", USD, 0, ErrSyntax},
		{"bare exponent", "1e", USD, 0, ErrSyntax},
		{"minus only", "-", USD, 0, ErrSyntax},
		{"hex", "0x10", USD, 0, ErrSyntax},
		{"bad currency", "1", Currency("GBP"), 0, ErrUnsupportedCurrency},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseMajor(tc.text, tc.cur)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("ParseMajor(%q, %s) = %v, %v; want error %v", tc.text, tc.cur, got, err, tc.err)
				}
				return
			}
			if err != nil || got != (Amount{Minor: tc.want, Currency: tc.cur}) {
				t.Fatalf("ParseMajor(%q, %s) = %v, %v; want %d", tc.text, tc.cur, got, err, tc.want)
			}
		})
	}
}

func TestParsePositiveMajor(t *testing.T) {
	if _, err := ParsePositiveMajor("0.00", USD); !errors.Is(err, ErrZero) {
		t.Fatalf("zero: err = %v, want ErrZero", err)
	}
	if _, err := ParsePositiveMajor("-1", USD); !errors.Is(err, ErrNegative) {
		t.Fatalf("negative: err = %v, want ErrNegative", err)
	}
	if a, err := ParsePositiveMajor("0.01", USD); err != nil || a.Minor != 1 {
		t.Fatalf("one cent: %v, %v", a, err)
	}
}

func TestAmountMajor(t *testing.T) {
	for _, tc := range []struct {
		a    Amount
		want string
	}{
		{Amount{250, USD}, "2.50"},
		{Amount{5, EUR}, "0.05"},
		{Amount{50, EUR}, "0.50"},
		{Amount{0, USD}, "0.00"},
		{Amount{100, USD}, "1.00"},
		{Amount{-250, USD}, "-2.50"},
		{Amount{-5, USD}, "-0.05"},
		{Amount{1000, VND}, "1000"},
		{Amount{0, VND}, "0"},
		{Amount{-7, VND}, "-7"},
		{Amount{math.MaxInt64, USD}, "92233720368547758.07"},
		{Amount{math.MinInt64, USD}, "-92233720368547758.08"},
	} {
		t.Run(tc.want+" "+string(tc.a.Currency), func(t *testing.T) {
			if got := tc.a.Major(); got != tc.want {
				t.Fatalf("%d %s Major() = %q, want %q", tc.a.Minor, tc.a.Currency, got, tc.want)
			}
			if got := tc.a.Number().String(); got != tc.want {
				t.Fatalf("Number() = %q, want %q", got, tc.want)
			}
		})
	}
	if got := (Amount{250, USD}).String(); got != "2.50 USD" {
		t.Fatalf("String() = %q", got)
	}
}

var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?([0-9]+))?$`)

// oracle computes ParseMajor's expected answer with math/big, for texts
// whose exponent is small enough to evaluate.
func oracle(text string, c Currency) (int64, error, bool) {
	m := jsonNumber.FindStringSubmatch(text)
	if m == nil {
		return 0, ErrSyntax, true
	}
	if len(m[4]) > 4 {
		return 0, nil, false
	}
	r, ok := new(big.Rat).SetString(text)
	if !ok {
		return 0, nil, false
	}
	if r.Sign() < 0 {
		return 0, ErrNegative, true
	}
	r.Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(c.Decimals())), nil)))
	if !r.IsInt() {
		return 0, ErrTooManyDecimals, true
	}
	if !r.Num().IsInt64() {
		return 0, ErrOverflow, true
	}
	return r.Num().Int64(), nil, true
}

func FuzzParseMajor(f *testing.F) {
	for _, s := range []string{"2.5", "2.505", "1000", "1000.5", "-0", "0.01", "1e-3", "25e-1", "1E2",
		"92233720368547758.07", "92233720368547758.08", "9223372036854775807", "", ".5", "01", "1e99999999999"} {
		f.Add(s, int64(250))
	}
	f.Add("7", int64(math.MaxInt64))
	f.Add("0", int64(0))
	f.Fuzz(func(t *testing.T, text string, minor int64) {
		for _, c := range []Currency{USD, EUR, VND} {
			a, err := ParseMajor(text, c)
			if want, wantErr, ok := oracle(text, c); ok {
				if wantErr != nil && !errors.Is(err, wantErr) {
					t.Fatalf("ParseMajor(%q, %s) = %v, %v; want error %v", text, c, a, err, wantErr)
				}
				if wantErr == nil && (err != nil || a.Minor != want) {
					t.Fatalf("ParseMajor(%q, %s) = %v, %v; want %d", text, c, a, err, want)
				}
			}
			if err == nil {
				// Round trip: the formatted amount parses back to itself.
				back, err := ParseMajor(a.Major(), c)
				if err != nil || back != a {
					t.Fatalf("ParseMajor(%q) = %v; Major() %q parses to %v, %v", text, a, a.Major(), back, err)
				}
			}
			// Any non-negative minor amount survives format and parse.
			if minor >= 0 {
				want := Amount{Minor: minor, Currency: c}
				back, err := ParseMajor(want.Major(), c)
				if err != nil || back != want {
					t.Fatalf("%d %s: Major() %q parses to %v, %v", minor, c, want.Major(), back, err)
				}
			}
		}
	})
}

func TestMulDivHalfUp(t *testing.T) {
	for _, tc := range []struct {
		a, b, c, want int64
	}{
		{1, 1, 2, 1},   // 0.5 rounds up
		{1, 1, 3, 0},   // 0.333 down
		{2, 1, 3, 1},   // 0.667 up
		{5, 1, 10, 1},  // 0.5 up
		{4, 1, 10, 0},  // 0.4 down
		{15, 1, 10, 2}, // 1.5 up
		{25, 1, 10, 3}, // 2.5 up (half-up, not banker's)
		{0, 7, 3, 0},
		{math.MaxInt64, math.MaxInt64, math.MaxInt64, math.MaxInt64},
		{math.MaxInt64, 3, 4, 6917529027641081855}, // 6917529027641081855.25
		{math.MaxInt64, 1, 2, 4611686018427387904}, // ...903.5 up
	} {
		t.Run(strconv.FormatInt(tc.a, 10)+"x"+strconv.FormatInt(tc.b, 10)+"/"+strconv.FormatInt(tc.c, 10), func(t *testing.T) {
			got, err := mulDivHalfUp(tc.a, tc.b, tc.c)
			if err != nil || got != tc.want {
				t.Fatalf("= %d, %v; want %d", got, err, tc.want)
			}
		})
	}
	if _, err := mulDivHalfUp(math.MaxInt64, 2, 1); !errors.Is(err, ErrOverflow) {
		t.Fatalf("overflow: err = %v", err)
	}
}

func TestNew(t *testing.T) {
	if a, err := New(250, EUR); err != nil || a != (Amount{250, EUR}) {
		t.Fatalf("New(250, EUR) = %v, %v", a, err)
	}
	if _, err := New(1, Currency("usd")); !errors.Is(err, ErrUnsupportedCurrency) {
		t.Fatalf("New with a lower-case code: err = %v (codes are parsed by ParseCurrency)", err)
	}
}
