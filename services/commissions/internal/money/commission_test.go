package money

import (
	"errors"
	"testing"
	"time"
)

func mustTerms(t *testing.T, p ProgramTerms) Terms {
	t.Helper()
	terms, err := NewTerms(p)
	if err != nil {
		t.Fatalf("NewTerms(%+v): %v", p, err)
	}
	return terms
}

func TestParseRate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
		err  bool
	}{
		{"10", "10", false},
		{"12.5", "12.5", false},
		{"12.50", "12.5", false},
		{"0.0001", "0.0001", false},
		{"33.33333333", "33.33333333", false},
		{"1.25e1", "12.5", false},
		{"33.333333333", "", true}, // 9 decimals
		{"0", "", true},
		{"-5", "", true},
		{"abc", "", true},
		{"", "", true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			r, err := ParseRate(tc.in)
			if tc.err {
				if !errors.Is(err, ErrRate) {
					t.Fatalf("ParseRate(%q) = %v, %v; want ErrRate", tc.in, r, err)
				}
				return
			}
			if err != nil || r.String() != tc.want {
				t.Fatalf("ParseRate(%q) = %v, %v; want %s", tc.in, r, err, tc.want)
			}
		})
	}
}

func TestNewTerms(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    ProgramTerms
		err  error
	}{
		{"percent", ProgramTerms{CommissionType: "percent", CommissionRate: "12.5", Currency: "USD"}, nil},
		{"percent 100", ProgramTerms{CommissionType: "percent", CommissionRate: "100", Currency: "USD"}, nil},
		{"percent 100.0001", ProgramTerms{CommissionType: "recurring_percent", CommissionRate: "100.0001", Currency: "USD"}, ErrRate},
		{"percent zero", ProgramTerms{CommissionType: "percent", CommissionRate: "0", Currency: "USD"}, ErrRate},
		{"fixed usd", ProgramTerms{CommissionType: "fixed", CommissionRate: "10.5", Currency: "USD"}, nil},
		{"fixed usd sub cent", ProgramTerms{CommissionType: "fixed", CommissionRate: "10.505", Currency: "USD"}, ErrTooManyDecimals},
		{"fixed vnd decimals", ProgramTerms{CommissionType: "recurring_fixed", CommissionRate: "12.5", Currency: "VND"}, ErrTooManyDecimals},
		{"fixed over 100 allowed", ProgramTerms{CommissionType: "fixed", CommissionRate: "50000", Currency: "VND"}, nil},
		{"fixed zero", ProgramTerms{CommissionType: "fixed", CommissionRate: "0", Currency: "USD"}, ErrZero},
		{"unknown type", ProgramTerms{CommissionType: "Percent", CommissionRate: "10", Currency: "USD"}, ErrUnknownCommissionType},
		{"bad currency", ProgramTerms{CommissionType: "percent", CommissionRate: "10", Currency: "GBP"}, ErrUnsupportedCurrency},
		{"negative duration", ProgramTerms{CommissionType: "recurring_percent", CommissionRate: "10", Currency: "USD", DurationMonths: -1}, ErrInvalid},
		{"lead", ProgramTerms{CommissionType: "percent", CommissionRate: "10", Currency: "EUR", LeadCommission: "1.5"}, nil},
		{"lead negative", ProgramTerms{CommissionType: "percent", CommissionRate: "10", Currency: "EUR", LeadCommission: "-1"}, ErrNegative},
		{"lead sub cent", ProgramTerms{CommissionType: "percent", CommissionRate: "10", Currency: "EUR", LeadCommission: "0.001"}, ErrTooManyDecimals},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewTerms(tc.p)
			if tc.err == nil && err != nil || tc.err != nil && !errors.Is(err, tc.err) {
				t.Fatalf("NewTerms(%+v) = %v, want %v", tc.p, err, tc.err)
			}
		})
	}
	terms := mustTerms(t, ProgramTerms{CommissionType: "fixed", CommissionRate: "10.5", Currency: "usd", LeadCommission: "2"})
	if terms.Fixed != (Amount{1050, USD}) || terms.Lead != (Amount{200, USD}) {
		t.Fatalf("fixed terms = %+v", terms)
	}
}

var (
	jan1  = time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	jan31 = time.Date(2026, 1, 31, 10, 0, 0, 0, time.UTC)
)

func TestSaleCommission(t *testing.T) {
	pct := func(rate string) ProgramTerms {
		return ProgramTerms{CommissionType: "percent", CommissionRate: rate, Currency: "USD"}
	}
	rpct := func(rate string, months int) ProgramTerms {
		return ProgramTerms{CommissionType: "recurring_percent", CommissionRate: rate, Currency: "USD", DurationMonths: months}
	}
	first := History{}
	after := func(at time.Time) History { return History{FirstCommissionedAt: at, HasSaleCommission: true} }
	for _, tc := range []struct {
		name   string
		p      ProgramTerms
		sale   Sale
		h      History
		want   Amount
		reason Reason
	}{
		// percent: round_half_up(amount × rate / 100) in the sale's currency.
		{"percent usd", pct("10"), Sale{Amount: Amount{10000, USD}, At: jan1}, first, Amount{1000, USD}, ""},
		{"percent eur", pct("10"), Sale{Amount: Amount{1999, EUR}, At: jan1}, first, Amount{200, EUR}, ""},    // 199.9
		{"percent vnd", pct("10"), Sale{Amount: Amount{99999, VND}, At: jan1}, first, Amount{10000, VND}, ""}, // 9999.9
		{"percent usd half up", pct("10"), Sale{Amount: Amount{5, USD}, At: jan1}, first, Amount{1, USD}, ""}, // 0.5
		{"percent usd below half", pct("10"), Sale{Amount: Amount{4, USD}, At: jan1}, first, Amount{}, ReasonRoundsToZero},
		{"percent vnd half up", pct("10"), Sale{Amount: Amount{15, VND}, At: jan1}, first, Amount{2, VND}, ""},                      // 1.5
		{"percent vnd 2.5 up", pct("10"), Sale{Amount: Amount{25, VND}, At: jan1}, first, Amount{3, VND}, ""},                       // half-up, not to even
		{"percent eur half up", pct("12.5"), Sale{Amount: Amount{4, EUR}, At: jan1}, first, Amount{1, EUR}, ""},                     // 0.5
		{"percent fractional rate", pct("12.5"), Sale{Amount: Amount{999, USD}, At: jan1}, first, Amount{125, USD}, ""},             // 124.875
		{"percent fractional rate below half", pct("12.5"), Sale{Amount: Amount{1003, USD}, At: jan1}, first, Amount{125, USD}, ""}, // 125.375
		{"percent tiny rate", pct("0.0001"), Sale{Amount: Amount{5_000_000, USD}, At: jan1}, first, Amount{5, USD}, ""},
		{"percent tiny rate half", pct("0.0001"), Sale{Amount: Amount{500_000, VND}, At: jan1}, first, Amount{1, VND}, ""}, // 0.5
		{"percent 1 cent sale", pct("50"), Sale{Amount: Amount{1, USD}, At: jan1}, first, Amount{1, USD}, ""},              // 0.5
		{"percent 100", pct("100"), Sale{Amount: Amount{12345, EUR}, At: jan1}, first, Amount{12345, EUR}, ""},
		{"percent repeating rate", pct("33.33333333"), Sale{Amount: Amount{300, USD}, At: jan1}, first, Amount{100, USD}, ""}, // 99.99999999
		{"percent huge sale no overflow", pct("99.99999999"), Sale{Amount: Amount{9_000_000_000_000_000_000, VND}, At: jan1}, first, Amount{8_999_999_999_100_000_000, VND}, ""},
		{"percent second sale", pct("10"), Sale{Amount: Amount{10000, USD}, At: jan1}, after(jan1), Amount{}, ReasonAlreadyCommissioned},
		{"percent test sale", pct("10"), Sale{Amount: Amount{10000, USD}, At: jan1, Test: true}, first, Amount{}, ReasonTestSale},

		// recurring_percent: every sale before first + N months.
		{"recurring first", rpct("10", 1), Sale{Amount: Amount{10000, USD}, At: jan1}, first, Amount{1000, USD}, ""},
		{"recurring inside", rpct("10", 1), Sale{Amount: Amount{10000, USD}, At: jan1.AddDate(0, 1, 0).Add(-time.Nanosecond)}, after(jan1), Amount{1000, USD}, ""},
		{"recurring at bound", rpct("10", 1), Sale{Amount: Amount{10000, USD}, At: jan1.AddDate(0, 1, 0)}, after(jan1), Amount{}, ReasonDurationEnded},
		{"recurring 12 months 11th renewal", rpct("10", 12), Sale{Amount: Amount{10000, USD}, At: jan1.AddDate(0, 11, 0)}, after(jan1), Amount{1000, USD}, ""},
		{"recurring 12 months 12th renewal", rpct("10", 12), Sale{Amount: Amount{10000, USD}, At: jan1.AddDate(1, 0, 0)}, after(jan1), Amount{}, ReasonDurationEnded},
		{"recurring lifetime", rpct("10", 0), Sale{Amount: Amount{10000, USD}, At: jan1.AddDate(30, 0, 0)}, after(jan1), Amount{1000, USD}, ""},
		{"recurring jan 31 feb 28 renewal ends 1 month", rpct("10", 1), Sale{Amount: Amount{10000, USD}, At: time.Date(2026, 2, 28, 10, 0, 0, 0, time.UTC)}, after(jan31), Amount{}, ReasonDurationEnded},
		{"recurring jan 31 feb 28 earlier in the day", rpct("10", 1), Sale{Amount: Amount{10000, USD}, At: time.Date(2026, 2, 28, 9, 59, 0, 0, time.UTC)}, after(jan31), Amount{1000, USD}, ""},
		{"recurring sale before first", rpct("10", 1), Sale{Amount: Amount{10000, USD}, At: jan1.Add(-time.Hour)}, after(jan1), Amount{1000, USD}, ""},
		{"recurring offset times compared as instants", rpct("10", 1), Sale{Amount: Amount{10000, USD}, At: time.Date(2026, 2, 1, 11, 0, 0, 0, time.FixedZone("+2", 7200))}, after(jan1), Amount{1000, USD}, ""},
		{"recurring test sale", rpct("10", 0), Sale{Amount: Amount{10000, USD}, At: jan1, Test: true}, first, Amount{}, ReasonTestSale},

		// fixed: program currency, whatever the sale's.
		{"fixed", ProgramTerms{CommissionType: "fixed", CommissionRate: "25", Currency: "EUR"}, Sale{Amount: Amount{1, USD}, At: jan1}, first, Amount{2500, EUR}, ""},
		{"fixed vnd program", ProgramTerms{CommissionType: "fixed", CommissionRate: "50000", Currency: "VND"}, Sale{Amount: Amount{100, USD}, At: jan1}, first, Amount{50000, VND}, ""},
		{"fixed second sale", ProgramTerms{CommissionType: "fixed", CommissionRate: "25", Currency: "EUR"}, Sale{Amount: Amount{1, USD}, At: jan1}, after(jan1), Amount{}, ReasonAlreadyCommissioned},
		{"recurring fixed inside", ProgramTerms{CommissionType: "recurring_fixed", CommissionRate: "2.5", Currency: "USD", DurationMonths: 3}, Sale{Amount: Amount{10, USD}, At: jan1.AddDate(0, 2, 0)}, after(jan1), Amount{250, USD}, ""},
		{"recurring fixed ended", ProgramTerms{CommissionType: "recurring_fixed", CommissionRate: "2.5", Currency: "USD", DurationMonths: 3}, Sale{Amount: Amount{10, USD}, At: jan1.AddDate(0, 3, 0)}, after(jan1), Amount{}, ReasonDurationEnded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := mustTerms(t, tc.p).SaleCommission(tc.sale, tc.h)
			if err != nil {
				t.Fatal(err)
			}
			want := Decision{Due: tc.reason == "", Amount: tc.want, Reason: tc.reason}
			if d != want {
				t.Fatalf("SaleCommission = %+v, want %+v", d, want)
			}
		})
	}
}

func TestSaleCommissionErrors(t *testing.T) {
	terms := mustTerms(t, ProgramTerms{CommissionType: "percent", CommissionRate: "10", Currency: "USD"})
	for _, tc := range []struct {
		name string
		sale Sale
		err  error
	}{
		{"zero amount", Sale{Amount: Amount{0, USD}, At: jan1}, ErrZero},
		{"negative amount", Sale{Amount: Amount{-1, USD}, At: jan1}, ErrZero},
		{"bad currency", Sale{Amount: Amount{1, "GBP"}, At: jan1}, ErrUnsupportedCurrency},
		{"no time", Sale{Amount: Amount{1, USD}}, ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := terms.SaleCommission(tc.sale, History{}); !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
		})
	}
	if _, err := (Terms{Type: Percent}).SaleCommission(Sale{Amount: Amount{1, USD}, At: jan1}, History{}); !errors.Is(err, ErrRate) {
		t.Fatalf("hand-built terms without a rate: err = %v", err)
	}
	if _, err := (Terms{Type: "bogus"}).SaleCommission(Sale{Amount: Amount{1, USD}, At: jan1}, History{}); !errors.Is(err, ErrUnknownCommissionType) {
		t.Fatalf("hand-built terms with a bad type: err = %v", err)
	}
}

func TestLeadCommission(t *testing.T) {
	with := mustTerms(t, ProgramTerms{CommissionType: "percent", CommissionRate: "10", Currency: "EUR", LeadCommission: "1.5"})
	if d := with.LeadCommission(false); d != (Decision{Due: true, Amount: Amount{150, EUR}}) {
		t.Fatalf("lead = %+v", d)
	}
	if d := with.LeadCommission(true); d.Due || d.Reason != ReasonTestLead {
		t.Fatalf("test lead = %+v", d)
	}
	for _, lead := range []string{"", "0", "0.00"} {
		none := mustTerms(t, ProgramTerms{CommissionType: "percent", CommissionRate: "10", Currency: "EUR", LeadCommission: lead})
		if d := none.LeadCommission(false); d.Due || d.Reason != ReasonNoLeadCommission {
			t.Fatalf("lead %q = %+v", lead, d)
		}
	}
}

func TestAddMonths(t *testing.T) {
	d := func(y int, m time.Month, day int) time.Time { return time.Date(y, m, day, 10, 30, 0, 0, time.UTC) }
	for _, tc := range []struct {
		name   string
		from   time.Time
		months int
		want   time.Time
	}{
		{"jan 1 + 1", d(2026, 1, 1), 1, d(2026, 2, 1)},
		{"jan 31 + 1 clamps to feb 28", d(2026, 1, 31), 1, d(2026, 2, 28)},
		{"jan 31 + 1 leap year clamps to feb 29", d(2028, 1, 31), 1, d(2028, 2, 29)},
		{"jan 31 + 2 is mar 31", d(2026, 1, 31), 2, d(2026, 3, 31)},
		{"mar 31 + 1 clamps to apr 30", d(2026, 3, 31), 1, d(2026, 4, 30)},
		{"feb 29 + 12 clamps to feb 28", d(2028, 2, 29), 12, d(2029, 2, 28)},
		{"dec 15 + 1 crosses the year", d(2026, 12, 15), 1, d(2027, 1, 15)},
		{"aug 31 + 18", d(2026, 8, 31), 18, d(2028, 2, 29)},
		{"zero", d(2026, 5, 17), 0, d(2026, 5, 17)},
		{"offset converted to utc first", time.Date(2026, 2, 1, 1, 0, 0, 0, time.FixedZone("+2", 7200)), 1, time.Date(2026, 2, 28, 23, 0, 0, 0, time.UTC)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := AddMonths(tc.from, tc.months); !got.Equal(tc.want) {
				t.Fatalf("AddMonths(%v, %d) = %v, want %v", tc.from, tc.months, got, tc.want)
			}
		})
	}
	// time.AddDate overflows instead (the behaviour AddMonths avoids).
	if got := d(2026, 1, 31).AddDate(0, 1, 0); !got.Equal(d(2026, 3, 3)) {
		t.Fatalf("AddDate(Jan 31, 1 month) = %v; the documentation says Mar 3", got)
	}
}
