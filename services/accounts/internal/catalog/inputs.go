package catalog

import (
	"fmt"
	"math/big"
	"net/mail"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Inputs carry what a client sent; nil pointers are fields left out.

type AdvertiserInput struct {
	Name  *string
	Email *string
}

type UserInput struct {
	Email        *string
	Name         *string
	AdvertiserID *int64
	Blocked      *bool
}

// ProgramInput's numeric fields hold the JSON value exactly as sent (e.g.
// `12.5`, `"12"`, `true`), so that type and range problems are reported in
// the order the command-line init route defines, after the required-field
// check, with the contract's own messages.
type ProgramInput struct {
	AdvertiserID          *string
	Name                  *string
	Domain                *string
	CommissionType        *string
	CommissionRate        *string
	DurationMonths        *string
	CookieDuration        *string
	AttributionWindowDays *string
	HoldDays              *string
	LeadAuthPolicy        *string
	PaymentTrackingMode   *string
	AllowedOrigins        []string
	AllowedOriginsSet     bool
	Processor             *ProcessorInput
	// Currency is a JSON string; LeadCommission the raw JSON value.
	Currency       *string
	LeadCommission *string
}

type ProcessorInput struct {
	Status           *string
	AccountID        *string
	ChargesEnabled   *bool
	PayoutsEnabled   *bool
	DetailsSubmitted *bool
	ConnectedAt      *time.Time
	ConnectedAtNull  bool
}

type MemberInput struct {
	UserID      *int64
	Active      *bool
	Permissions []string
}

type PartnerInput struct {
	Name  *string
	Email *string
}

type PartnerProgramInput struct {
	PartnerID *int64
	Approved  *bool
}

type LinkInput struct {
	PartnerID *int64
	Code      *string
	Active    *bool
}

// Messages shared with the command-line init route, which creates programs
// through this same code path.
const (
	MsgCommissionRate      = "commission_rate must be a positive number"
	MsgCommissionRateCap   = "commission_rate is a percentage for this type and cannot exceed 100"
	MsgDurationMonths      = "duration_months must be a whole number of months (0 = lifetime)"
	MsgCookieDuration      = "cookie_duration must be a whole number of days from 1 to 365"
	msgCommissionTypeValid = "percent, fixed, recurring_percent, recurring_fixed"
)

// Messages of the program's currency and its fixed rewards.
const (
	MsgCurrency          = "currency must be one of: USD, EUR, VND"
	MsgLeadCommission    = "lead_commission must be a non-negative number"
	MsgLeadCommissionMax = "lead_commission is too large"
)

// TooManyDecimals is the message of an amount in major units of the
// program's currency (lead_commission, a fixed commission_rate) with more
// decimal places than the currency has: it is refused, never rounded.
func TooManyDecimals(field, currency string) string {
	return fmt.Sprintf("%s must have at most %d decimals for %s", field, currencyDecimals[currency], currency)
}

// InvalidCommissionType is the spec's message for an unknown commission type.
func InvalidCommissionType(v string) string {
	return fmt.Sprintf("Invalid commission_type: %s. Valid: %s", v, msgCommissionTypeValid)
}

var (
	linkCodeRe   = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	permissionRe = regexp.MustCompile(`^[a-z_]{1,32}:[a-z_]{1,32}$`)
	hostRe       = regexp.MustCompile(`^(?i)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*(:[0-9]{1,5})?$`)
)

const maxText = 200

const msgLinkCode = "code must be 1 to 64 letters, digits, '-' or '_'"

func requiredText(field string, v *string) (string, error) {
	if v == nil || strings.TrimSpace(*v) == "" {
		return "", invalid(field, field+" is required")
	}
	s := strings.TrimSpace(*v)
	if len(s) > maxText {
		return "", invalid(field, fmt.Sprintf("%s must be at most %d characters", field, maxText))
	}
	return s, nil
}

func requiredEmail(field string, v *string) (string, error) {
	s, err := requiredText(field, v)
	if err != nil {
		return "", err
	}
	a, perr := mail.ParseAddress(s)
	if perr != nil || a.Address != s {
		return "", invalid(field, field+" must be a valid email address")
	}
	return strings.ToLower(s), nil
}

func requiredID(field string, v *int64) (int64, error) {
	if v == nil {
		return 0, invalid(field, field+" is required")
	}
	if *v <= 0 {
		return 0, invalid(field, field+" must be a positive integer")
	}
	return *v, nil
}

func (in AdvertiserInput) validate() (Advertiser, error) {
	name, err := requiredText("name", in.Name)
	if err != nil {
		return Advertiser{}, err
	}
	email, err := requiredEmail("email", in.Email)
	if err != nil {
		return Advertiser{}, err
	}
	return Advertiser{Name: name, Email: email}, nil
}

func (in UserInput) validate() (User, error) {
	email, err := requiredEmail("email", in.Email)
	if err != nil {
		return User{}, err
	}
	u := User{Email: email}
	if in.Name != nil {
		u.Name = strings.TrimSpace(*in.Name)
		if len(u.Name) > maxText {
			return User{}, invalid("name", fmt.Sprintf("name must be at most %d characters", maxText))
		}
	}
	if in.AdvertiserID != nil {
		if u.AdvertiserID, err = requiredID("advertiser_id", in.AdvertiserID); err != nil {
			return User{}, err
		}
	}
	if in.Blocked != nil {
		u.Blocked = *in.Blocked
	}
	return u, nil
}

func (in PartnerInput) validate() (Partner, error) {
	name, err := requiredText("name", in.Name)
	if err != nil {
		return Partner{}, err
	}
	email, err := requiredEmail("email", in.Email)
	if err != nil {
		return Partner{}, err
	}
	return Partner{Name: name, Email: email}, nil
}

func (in MemberInput) validate(programID int64) (Membership, error) {
	uid, err := requiredID("user_id", in.UserID)
	if err != nil {
		return Membership{}, err
	}
	if in.Active == nil {
		return Membership{}, invalid("active", "active is required")
	}
	perms := make([]string, 0, len(in.Permissions))
	seen := map[string]bool{}
	for _, p := range in.Permissions {
		if !permissionRe.MatchString(p) {
			return Membership{}, invalid("permissions", fmt.Sprintf("permissions must be a list like [\"tracking:read\"]; %q is not a permission", p))
		}
		if !seen[p] {
			seen[p] = true
			perms = append(perms, p)
		}
	}
	return Membership{ProgramID: programID, UserID: uid, Active: *in.Active, Permissions: perms}, nil
}

func (in PartnerProgramInput) validate(programID int64) (PartnerProgram, error) {
	pid, err := requiredID("partner_id", in.PartnerID)
	if err != nil {
		return PartnerProgram{}, err
	}
	pp := PartnerProgram{PartnerID: pid, ProgramID: programID}
	if in.Approved != nil {
		pp.Approved = *in.Approved
	}
	return pp, nil
}

func (in LinkInput) validate(programID int64) (Link, error) {
	pid, err := requiredID("partner_id", in.PartnerID)
	if err != nil {
		return Link{}, err
	}
	if in.Code == nil || *in.Code == "" {
		return Link{}, invalid("code", "code is required")
	}
	if !linkCodeRe.MatchString(*in.Code) {
		return Link{}, invalid("code", msgLinkCode)
	}
	l := Link{ProgramID: programID, PartnerID: pid, Code: *in.Code, Active: true}
	if in.Active != nil {
		l.Active = *in.Active
	}
	return l, nil
}

// validateFields checks each field on its own, in the order the command-line
// init route reports them. create requires the fields a new program needs.
func (in ProgramInput) validateFields(create bool) error {
	if create {
		var missing []string
		if in.Name == nil || strings.TrimSpace(*in.Name) == "" {
			missing = append(missing, "name")
		}
		if in.Domain == nil || strings.TrimSpace(*in.Domain) == "" {
			missing = append(missing, "domain")
		}
		if in.CommissionType == nil || *in.CommissionType == "" {
			missing = append(missing, "commission_type")
		}
		if in.CommissionRate == nil {
			missing = append(missing, "commission_rate")
		}
		if len(missing) > 0 {
			return invalid(missing[0], "Missing required fields: name, domain, commission_type, commission_rate")
		}
		if in.AdvertiserID == nil {
			return invalid("advertiser_id", "advertiser_id is required")
		}
	}
	if in.AdvertiserID != nil {
		if v, ok := wholeNumber(*in.AdvertiserID); !ok || v <= 0 {
			return invalid("advertiser_id", "advertiser_id must be a positive integer")
		}
	}
	if in.Name != nil {
		if _, err := requiredText("name", in.Name); err != nil {
			return err
		}
	}
	if in.Domain != nil {
		if _, err := normalizeDomain(*in.Domain); err != nil {
			return err
		}
	}
	if in.CommissionType != nil && !validCommissionType(*in.CommissionType) {
		return invalid("commission_type", InvalidCommissionType(*in.CommissionType))
	}
	if in.CommissionRate != nil {
		r, err := parseRate(*in.CommissionRate)
		if err != nil {
			return err
		}
		if in.CommissionType != nil && isPercent(*in.CommissionType) && overHundred(r) {
			return invalid("commission_rate", MsgCommissionRateCap)
		}
	}
	for _, r := range in.ranges() {
		if r.raw == nil {
			continue
		}
		if v, ok := wholeNumber(*r.raw); !ok || v < r.min || v > r.max {
			return invalid(r.field, r.msg)
		}
	}
	if in.LeadAuthPolicy != nil && *in.LeadAuthPolicy != LeadAuthServerRequired && *in.LeadAuthPolicy != LeadAuthBrowserAllowed {
		return invalid("lead_auth_policy", "lead_auth_policy must be one of: server_required, browser_allowed")
	}
	if in.PaymentTrackingMode != nil && *in.PaymentTrackingMode != PaymentProcessorConnect && *in.PaymentTrackingMode != PaymentS2S {
		return invalid("payment_tracking_mode", "payment_tracking_mode must be one of: processor_connect, s2s")
	}
	if in.Currency != nil {
		if _, ok := currencyDecimals[*in.Currency]; !ok {
			return invalid("currency", MsgCurrency)
		}
	}
	if in.LeadCommission != nil {
		if _, err := parseLeadCommission(*in.LeadCommission); err != nil {
			return err
		}
	}
	if in.AllowedOriginsSet {
		if _, err := normalizeOrigins(in.AllowedOrigins); err != nil {
			return err
		}
	}
	if in.Processor != nil {
		if in.Processor.Status != nil && (strings.TrimSpace(*in.Processor.Status) == "" || len(*in.Processor.Status) > 64) {
			return invalid("processor_connection.status", "processor_connection.status must be a non-empty string of at most 64 characters")
		}
		if in.Processor.AccountID != nil && len(*in.Processor.AccountID) > 255 {
			return invalid("processor_connection.account_id", "processor_connection.account_id must be at most 255 characters")
		}
	}
	return nil
}

// apply sets the sent fields on p and checks the rules that span fields.
// It expects validateFields to have passed.
func (in ProgramInput) apply(p *Program) error {
	if in.AdvertiserID != nil {
		p.AdvertiserID, _ = wholeNumber(*in.AdvertiserID)
	}
	if in.Name != nil {
		p.Name = strings.TrimSpace(*in.Name)
	}
	if in.Domain != nil {
		d, err := normalizeDomain(*in.Domain)
		if err != nil {
			return err
		}
		p.Domain = d
	}
	if in.CommissionType != nil {
		p.CommissionType = *in.CommissionType
	}
	if in.CommissionRate != nil {
		r, err := parseRate(*in.CommissionRate)
		if err != nil {
			return err
		}
		p.CommissionRate = r
	}
	if isPercent(p.CommissionType) {
		r, err := parseRate(p.CommissionRate)
		if err != nil {
			return err
		}
		if overHundred(r) {
			return invalid("commission_rate", MsgCommissionRateCap)
		}
	}
	if in.DurationMonths != nil {
		p.DurationMonths = mustWhole(*in.DurationMonths)
	}
	if in.CookieDuration != nil {
		v := mustWhole(*in.CookieDuration)
		p.CookieDuration = &v
	}
	if in.AttributionWindowDays != nil {
		p.AttributionWindowDays = mustWhole(*in.AttributionWindowDays)
	}
	if in.HoldDays != nil {
		p.HoldDays = mustWhole(*in.HoldDays)
	}
	if in.LeadAuthPolicy != nil {
		p.LeadAuthPolicy = *in.LeadAuthPolicy
	}
	if in.PaymentTrackingMode != nil {
		p.PaymentTrackingMode = *in.PaymentTrackingMode
	}
	if err := in.applyMoney(p); err != nil {
		return err
	}
	if in.AllowedOriginsSet {
		o, err := normalizeOrigins(in.AllowedOrigins)
		if err != nil {
			return err
		}
		p.AllowedOrigins = o
	}
	if pc := in.Processor; pc != nil {
		if pc.Status != nil {
			p.Processor.Status = strings.TrimSpace(*pc.Status)
		}
		if pc.AccountID != nil {
			p.Processor.AccountID = *pc.AccountID
		}
		if pc.ChargesEnabled != nil {
			p.Processor.ChargesEnabled = *pc.ChargesEnabled
		}
		if pc.PayoutsEnabled != nil {
			p.Processor.PayoutsEnabled = *pc.PayoutsEnabled
		}
		if pc.DetailsSubmitted != nil {
			p.Processor.DetailsSubmitted = *pc.DetailsSubmitted
		}
		if pc.ConnectedAt != nil {
			t := pc.ConnectedAt.UTC()
			p.Processor.ConnectedAt = &t
		} else if pc.ConnectedAtNull {
			p.Processor.ConnectedAt = nil
		}
	}
	return nil
}

// applyMoney sets the currency and the lead reward and checks the amounts
// in major units of the program's currency against its decimals: the lead
// reward, and the rate of a fixed type. A check runs when the request sends
// one of the fields it depends on, so a program stored before the currency
// existed (a fixed rate of 4 decimals) can still change its other settings.
func (in ProgramInput) applyMoney(p *Program) error {
	if in.Currency != nil {
		p.Currency = *in.Currency
	}
	if in.LeadCommission != nil {
		v, err := parseLeadCommission(*in.LeadCommission)
		if err != nil {
			return err
		}
		p.LeadCommission = v
	}
	if isFixed(p.CommissionType) && (in.Currency != nil || in.CommissionType != nil || in.CommissionRate != nil) &&
		!fitsCurrency(p.CommissionRate, p.Currency) {
		return invalid("commission_rate", TooManyDecimals("commission_rate", p.Currency))
	}
	if (in.Currency != nil || in.LeadCommission != nil) && !fitsCurrency(p.LeadCommission, p.Currency) {
		return invalid("lead_commission", TooManyDecimals("lead_commission", p.Currency))
	}
	return nil
}

// parseLeadCommission accepts a JSON number of 0 or more, below 100000000
// (the column's range), and returns it as an exact canonical decimal (no
// trailing zeros, every decimal sent kept: the currency's limit is checked
// by applyMoney, never by rounding).
func parseLeadCommission(raw string) (string, error) {
	r, ok := JSONNumber(raw)
	if !ok || r.Sign() < 0 {
		return "", invalid("lead_commission", MsgLeadCommission)
	}
	if r.Cmp(big.NewRat(100_000_000, 1)) >= 0 {
		return "", invalid("lead_commission", MsgLeadCommissionMax)
	}
	if n := decimalPlaces(r); n > 0 {
		return r.FloatString(n), nil
	}
	return r.FloatString(0), nil
}

// decimalPlaces is the number of decimal places of a value read from
// decimal text (its denominator divides a power of ten).
func decimalPlaces(r *big.Rat) int {
	x := new(big.Rat).Set(r)
	ten := big.NewRat(10, 1)
	n := 0
	for !x.IsInt() {
		x.Mul(x, ten)
		n++
	}
	return n
}

// fitsCurrency reports whether the canonical decimal v has no more decimal
// places than currency has. An unknown currency (refused by validateFields)
// is not checked here.
func fitsCurrency(v, currency string) bool {
	d, ok := currencyDecimals[currency]
	if !ok {
		return true
	}
	r, ok := new(big.Rat).SetString(v)
	return !ok || decimalPlaces(r) <= d
}

type numRange struct {
	field    string
	raw      *string
	min, max int64
	msg      string
}

// ranges lists the whole-number fields in the order they are checked.
func (in ProgramInput) ranges() []numRange {
	return []numRange{
		{"duration_months", in.DurationMonths, 0, 1200, MsgDurationMonths},
		{"cookie_duration", in.CookieDuration, 1, 365, MsgCookieDuration},
		{"attribution_window_days", in.AttributionWindowDays, 1, 3650, "attribution_window_days must be a whole number of days from 1 to 3650"},
		{"hold_days", in.HoldDays, 0, 365, "hold_days must be a whole number of days from 0 to 365"},
	}
}

// wholeNumber reads a raw JSON number that is a whole value within int64
// (12 and 12.0 are; 12.5, "12" and true are not).
func wholeNumber(raw string) (int64, bool) {
	r, ok := JSONNumber(raw)
	if !ok || !r.IsInt() || !r.Num().IsInt64() {
		return 0, false
	}
	return r.Num().Int64(), true
}

// mustWhole is for values validateFields already checked.
func mustWhole(raw string) int {
	v, _ := wholeNumber(raw)
	return int(v)
}

// JSONNumber parses raw JSON number syntax only: no quotes, no NaN, no hex.
func JSONNumber(raw string) (*big.Rat, bool) {
	raw = strings.TrimSpace(raw)
	if raw == "" || !jsonNumberRe.MatchString(raw) {
		return nil, false
	}
	return new(big.Rat).SetString(raw)
}

var jsonNumberRe = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]{1,3})?$`)

func validCommissionType(t string) bool {
	switch t {
	case CommissionPercent, CommissionFixed, CommissionRecurringPercent, CommissionRecurringFixed:
		return true
	}
	return false
}

func isPercent(t string) bool {
	return t == CommissionPercent || t == CommissionRecurringPercent
}

// isFixed reports the types whose commission_rate is an amount in major
// units of the program's currency.
func isFixed(t string) bool {
	return t == CommissionFixed || t == CommissionRecurringFixed
}

// parseRate accepts a positive decimal with at most four decimal places (the
// column's scale) and returns it in canonical form.
func parseRate(s string) (string, error) {
	r, ok := JSONNumber(s)
	if !ok || r.Sign() <= 0 {
		return "", invalid("commission_rate", MsgCommissionRate)
	}
	scaled := new(big.Rat).Mul(r, big.NewRat(10000, 1))
	if !scaled.IsInt() {
		return "", invalid("commission_rate", "commission_rate must have at most 4 decimal places")
	}
	if r.Cmp(big.NewRat(100_000_000, 1)) >= 0 {
		return "", invalid("commission_rate", "commission_rate is too large")
	}
	out := strings.TrimRight(strings.TrimRight(r.FloatString(4), "0"), ".")
	return out, nil
}

// overHundred reports whether a canonical rate from parseRate exceeds 100.
func overHundred(rate string) bool {
	r, ok := new(big.Rat).SetString(rate)
	return ok && r.Cmp(big.NewRat(100, 1)) > 0
}

func normalizeDomain(d string) (string, error) {
	d = strings.ToLower(strings.TrimSpace(d))
	if d == "" {
		return "", invalid("domain", "domain is required")
	}
	if len(d) > 253 || !hostRe.MatchString(d) {
		return "", invalid("domain", "domain must be a host name like shop.example.com")
	}
	return d, nil
}

const msgOrigins = "allowed_origins must be a list of origins like https://shop.example.com"

// origin is s as a browser serialises it in an Origin header (RFC 6454):
// scheme and host in lower case, the port only when it is not the
// scheme's default, nothing else. Only a value that can equal a real
// Origin header is one: an ASCII host name (an international one in its
// xn-- form, as browsers send it) or an IP address, a port of 1 to 65535.
func origin(s string) (string, bool) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.User != nil {
		return "", false
	}
	scheme, host, port := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port()
	if strings.HasSuffix(u.Host, ":") {
		return "", false // a colon with no port
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Zone() != "" {
			return "", false
		}
		if ip.Is6() {
			host = "[" + ip.String() + "]"
		} else {
			host = ip.String()
		}
	} else if !hostName(host) {
		return "", false
	}
	if port != "" {
		p, err := strconv.Atoi(port)
		if err != nil || p < 1 || p > 65535 {
			return "", false
		}
		if (scheme == "https" && p == 443) || (scheme == "http" && p == 80) {
			port = ""
		} else {
			port = strconv.Itoa(p)
		}
	}
	if port != "" {
		host += ":" + port
	}
	return scheme + "://" + host, true
}

// hostName reports whether h is a DNS host name: dot-separated labels of 1
// to 63 ASCII letters, digits and hyphens, none starting or ending with a
// hyphen, at most 253 characters.
func hostName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

func normalizeOrigins(in []string) ([]string, error) {
	out := make([]string, 0, len(in))
	seen := map[string]bool{}
	for _, o := range in {
		n, ok := origin(strings.TrimSpace(o))
		if !ok {
			return nil, invalid("allowed_origins", msgOrigins)
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	if len(out) > 100 {
		return nil, invalid("allowed_origins", "allowed_origins may list at most 100 origins")
	}
	return out, nil
}
