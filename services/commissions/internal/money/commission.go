package money

import (
	"errors"
	"fmt"
	"time"
)

// Errors of program terms.
var (
	// ErrUnknownCommissionType: not percent, fixed, recurring_percent or
	// recurring_fixed.
	ErrUnknownCommissionType = errors.New("unknown commission type")
	// ErrRate: a commission rate that is not a positive decimal, exceeds
	// 100 for a percent type, or has more than MaxRateDecimals decimals.
	ErrRate = errors.New("invalid commission rate")
)

// CommissionType is a program's commission_type.
type CommissionType string

// The commission types of the spec's Program.
const (
	Percent          CommissionType = "percent"
	Fixed            CommissionType = "fixed"
	RecurringPercent CommissionType = "recurring_percent"
	RecurringFixed   CommissionType = "recurring_fixed"
)

// ParseCommissionType reads a commission_type, exactly (lower case).
func ParseCommissionType(s string) (CommissionType, error) {
	t := CommissionType(s)
	switch t {
	case Percent, Fixed, RecurringPercent, RecurringFixed:
		return t, nil
	}
	return "", fmt.Errorf("%w: %q", ErrUnknownCommissionType, s)
}

// IsPercent reports whether the rate of t is a percentage of the sale.
func (t CommissionType) IsPercent() bool { return t == Percent || t == RecurringPercent }

// IsRecurring reports whether t pays on later sales of the customer too.
func (t CommissionType) IsRecurring() bool { return t == RecurringPercent || t == RecurringFixed }

// MaxRateDecimals is the most decimal places a percentage rate may have
// (accounts stores four; a few more are accepted so that no rate a future
// catalog sends is refused, and 100 × 10^8 still fits every computation).
const MaxRateDecimals = 8

// Rate is an exact positive decimal percentage, such as 12.5: units / 10^scale.
type Rate struct {
	units int64
	scale int
}

// ParseRate reads the decimal text of a rate (the catalog's
// commission_rate, e.g. "12.5", or a json.Number): a positive JSON number
// with at most MaxRateDecimals decimal places, exactly. It does not check
// the percent bound (see NewTerms).
func ParseRate(text string) (Rate, error) {
	d, err := parseDecimal(text)
	if err != nil {
		return Rate{}, fmt.Errorf("%w: %w", ErrRate, err)
	}
	if d.neg || d.isZero() {
		return Rate{}, fmt.Errorf("%w: %s is not positive", ErrRate, text)
	}
	scale := d.fracDigits()
	if scale > MaxRateDecimals {
		return Rate{}, fmt.Errorf("%w: %s has more than %d decimal places", ErrRate, text, MaxRateDecimals)
	}
	units, err := d.scaled(scale)
	if err != nil {
		return Rate{}, fmt.Errorf("%w: %s: %w", ErrRate, text, err)
	}
	return Rate{units: units, scale: scale}, nil
}

// String is the rate's canonical text: "12.5", "10".
func (r Rate) String() string { return formatScaled(r.units, r.scale) }

// IsZero reports whether r is the zero Rate (no rate).
func (r Rate) IsZero() bool { return r.units == 0 }

// atMostHundred reports r <= 100.
func (r Rate) atMostHundred() bool {
	return r.units <= 100*pow10(r.scale)
}

// ProgramTerms are a program's commission terms as the catalog replica holds
// them (text), plus the program's currency.
type ProgramTerms struct {
	CommissionType string
	// CommissionRate: a percentage for the percent types, major units of
	// Currency for the fixed ones.
	CommissionRate string
	// DurationMonths: >= 0, 0 is lifetime; read by the recurring types.
	DurationMonths int
	// Currency of the fixed amounts (fixed rates and LeadCommission).
	Currency string
	// LeadCommission: major units of Currency per settled lead; "" or "0"
	// is none.
	LeadCommission string
}

// Terms are validated commission terms. Build them with NewTerms.
type Terms struct {
	Type CommissionType
	// Percent is the rate of the percent types (0 < rate <= 100); zero for
	// the fixed ones.
	Percent Rate
	// Fixed is the amount of the fixed types (positive, program currency);
	// zero for the percent ones.
	Fixed Amount
	// DurationMonths: 0 is lifetime.
	DurationMonths int
	// Lead is paid per settled lead; zero is none.
	Lead Amount
}

// NewTerms validates and parses p:
//   - the type is one of the four;
//   - a percent rate is a positive decimal, at most 100, with at most
//     MaxRateDecimals decimals;
//   - a fixed rate is a positive amount of the program currency with no
//     more decimals than it has ("12.5" is refused for a VND program);
//   - duration_months is >= 0;
//   - lead_commission is "" or a non-negative amount of the program currency.
func NewTerms(p ProgramTerms) (Terms, error) {
	typ, err := ParseCommissionType(p.CommissionType)
	if err != nil {
		return Terms{}, err
	}
	cur, err := ParseCurrency(p.Currency)
	if err != nil {
		return Terms{}, fmt.Errorf("program currency: %w", err)
	}
	t := Terms{Type: typ, DurationMonths: p.DurationMonths, Lead: Amount{Currency: cur}}
	if p.DurationMonths < 0 {
		return Terms{}, fmt.Errorf("%w: duration_months %d is negative", ErrInvalid, p.DurationMonths)
	}
	if typ.IsPercent() {
		r, err := ParseRate(p.CommissionRate)
		if err != nil {
			return Terms{}, fmt.Errorf("commission_rate: %w", err)
		}
		if !r.atMostHundred() {
			return Terms{}, fmt.Errorf("commission_rate: %w: %s exceeds 100 percent", ErrRate, r)
		}
		t.Percent = r
	} else {
		a, err := ParsePositiveMajor(p.CommissionRate, cur)
		if err != nil {
			return Terms{}, fmt.Errorf("commission_rate: %w: %w", ErrRate, err)
		}
		t.Fixed = a
	}
	if p.LeadCommission != "" {
		a, err := ParseMajor(p.LeadCommission, cur)
		if err != nil {
			return Terms{}, fmt.Errorf("lead_commission: %w", err)
		}
		t.Lead = a
	}
	return t, nil
}

// Sale is an attributed sale the commission is computed for.
type Sale struct {
	Amount Amount
	// At is when the sale occurred (occurred_at, or when it was recorded).
	At time.Time
	// Test: a test sale, which never earns a commission.
	Test bool
}

// History is what the customer's earlier sales earned.
type History struct {
	// FirstCommissionedAt is the time (Sale.At) of the customer's first
	// sale that earned a commission in this program; zero when none did.
	FirstCommissionedAt time.Time
	// HasSaleCommission: a sale commission of this customer in this
	// program already exists, in any status (a reversed one too).
	HasSaleCommission bool
}

// Reason says why no commission is due.
type Reason string

// Reasons for no commission.
const (
	ReasonNone                = Reason("")
	ReasonTestSale            = Reason("test_sale")
	ReasonAlreadyCommissioned = Reason("already_commissioned")
	ReasonDurationEnded       = Reason("duration_ended")
	ReasonRoundsToZero        = Reason("rounds_to_zero")
	ReasonNoLeadCommission    = Reason("no_lead_commission")
	ReasonTestLead            = Reason("test_lead")
)

// Decision is whether a commission is due, and its amount; Reason is set
// exactly when it is not due.
type Decision struct {
	Due    bool
	Amount Amount
	Reason Reason
}

// SaleCommission decides the commission of an attributed sale:
//   - a test sale earns nothing (ReasonTestSale);
//   - percent and fixed pay once per customer: nothing when a sale
//     commission already exists (ReasonAlreadyCommissioned);
//   - the recurring types pay on every sale whose At is before
//     AddMonths(FirstCommissionedAt, DurationMonths) (always with 0
//     months, and always on the customer's first commissioned sale),
//     otherwise ReasonDurationEnded;
//   - the percent types pay round_half_up(amount × rate / 100) minor units
//     of the sale's currency; a result of 0 (a tiny sale) is not due
//     (ReasonRoundsToZero);
//   - the fixed types pay Terms.Fixed, in the program's currency whatever
//     the sale's currency.
func (t Terms) SaleCommission(s Sale, h History) (Decision, error) {
	if !s.Amount.Currency.Valid() {
		return Decision{}, fmt.Errorf("sale: %w: %q", ErrUnsupportedCurrency, string(s.Amount.Currency))
	}
	if s.Amount.Minor <= 0 {
		return Decision{}, fmt.Errorf("sale: %w: %d minor units", ErrZero, s.Amount.Minor)
	}
	if s.At.IsZero() {
		return Decision{}, fmt.Errorf("%w: sale time missing", ErrInvalid)
	}
	if err := t.validate(); err != nil {
		return Decision{}, err
	}
	if s.Test {
		return Decision{Reason: ReasonTestSale}, nil
	}
	if t.Type.IsRecurring() {
		first := h.FirstCommissionedAt
		if !first.IsZero() && t.DurationMonths > 0 && !s.At.Before(AddMonths(first, t.DurationMonths)) {
			return Decision{Reason: ReasonDurationEnded}, nil
		}
	} else if h.HasSaleCommission {
		return Decision{Reason: ReasonAlreadyCommissioned}, nil
	}
	if !t.Type.IsPercent() {
		return Decision{Due: true, Amount: t.Fixed}, nil
	}
	minor, err := mulDivHalfUp(s.Amount.Minor, t.Percent.units, 100*pow10(t.Percent.scale))
	if err != nil {
		return Decision{}, fmt.Errorf("percent commission of %s: %w", s.Amount, err)
	}
	if minor == 0 {
		return Decision{Reason: ReasonRoundsToZero}, nil
	}
	return Decision{Due: true, Amount: Amount{Minor: minor, Currency: s.Amount.Currency}}, nil
}

// LeadCommission decides the commission of a settled lead: Terms.Lead in
// the program's currency, unless it is zero (ReasonNoLeadCommission) or the
// lead is a test (ReasonTestLead). Provisional leads are not settled and
// must not be passed here.
func (t Terms) LeadCommission(test bool) Decision {
	switch {
	case test:
		return Decision{Reason: ReasonTestLead}
	case t.Lead.Minor <= 0:
		return Decision{Reason: ReasonNoLeadCommission}
	}
	return Decision{Due: true, Amount: t.Lead}
}

// validate checks Terms built by hand rather than by NewTerms.
func (t Terms) validate() error {
	if _, err := ParseCommissionType(string(t.Type)); err != nil {
		return err
	}
	if t.DurationMonths < 0 {
		return fmt.Errorf("%w: duration_months %d is negative", ErrInvalid, t.DurationMonths)
	}
	if t.Type.IsPercent() {
		if t.Percent.units <= 0 || t.Percent.scale > MaxRateDecimals || !t.Percent.atMostHundred() {
			return fmt.Errorf("%w: percent rate %s", ErrRate, t.Percent)
		}
		return nil
	}
	if !t.Fixed.Currency.Valid() || t.Fixed.Minor <= 0 {
		return fmt.Errorf("%w: fixed amount %s", ErrRate, t.Fixed)
	}
	return nil
}

// AddMonths returns t plus n calendar months in UTC, keeping the time of
// day, with the day clamped to the end of the target month: Jan 31 + 1 is
// Feb 28 (Feb 29 in a leap year), Mar 31 + 1 is Apr 30, Feb 29 + 12 is
// Feb 28. time.AddDate would instead overflow into the next month (Jan 31
// + 1 month is Mar 3), so a customer whose first payment fell on Jan 31
// would have a renewal on Feb 28 counted inside a 1-month duration: two
// payments for one month.
func AddMonths(t time.Time, n int) time.Time {
	t = t.UTC()
	y, m, d := t.Date()
	last := time.Date(y, m+time.Month(n)+1, 0, 0, 0, 0, 0, time.UTC).Day()
	return time.Date(y, m+time.Month(n), min(d, last), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}
