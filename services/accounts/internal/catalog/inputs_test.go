package catalog

import (
	"errors"
	"strings"
	"testing"

	"github.com/svc-dev/svc/libs/errkind"
)

func sp(s string) *string { return &s }

func validProgram() ProgramInput {
	return ProgramInput{
		AdvertiserID:   sp("1"),
		Name:           sp("Shop"),
		Domain:         sp("shop.example.com"),
		CommissionType: sp("percent"),
		CommissionRate: sp("12.5"),
	}
}

func TestProgramInputValidation(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*ProgramInput)
		field  string
		msg    string
	}{
		{"missing name", func(p *ProgramInput) { p.Name = nil }, "name", "Missing required fields: name, domain, commission_type, commission_rate"},
		{"missing rate", func(p *ProgramInput) { p.CommissionRate = nil }, "commission_rate", "Missing required fields: name, domain, commission_type, commission_rate"},
		{"missing advertiser", func(p *ProgramInput) { p.AdvertiserID = nil }, "advertiser_id", "advertiser_id is required"},
		{"advertiser not an integer", func(p *ProgramInput) { p.AdvertiserID = sp(`"1"`) }, "advertiser_id", "advertiser_id must be a positive integer"},
		{"unknown commission type", func(p *ProgramInput) { p.CommissionType = sp("bogus") }, "commission_type",
			"Invalid commission_type: bogus. Valid: percent, fixed, recurring_percent, recurring_fixed"},
		{"rate is a string", func(p *ProgramInput) { p.CommissionRate = sp(`"10"`) }, "commission_rate", MsgCommissionRate},
		{"rate zero", func(p *ProgramInput) { p.CommissionRate = sp("0") }, "commission_rate", MsgCommissionRate},
		{"rate negative", func(p *ProgramInput) { p.CommissionRate = sp("-3") }, "commission_rate", MsgCommissionRate},
		{"rate over 100 for percent", func(p *ProgramInput) { p.CommissionRate = sp("100.5") }, "commission_rate", MsgCommissionRateCap},
		{"rate over 100 for recurring percent", func(p *ProgramInput) {
			p.CommissionType = sp("recurring_percent")
			p.CommissionRate = sp("101")
		}, "commission_rate", MsgCommissionRateCap},
		{"duration fractional", func(p *ProgramInput) { p.DurationMonths = sp("1.5") }, "duration_months", MsgDurationMonths},
		{"duration negative", func(p *ProgramInput) { p.DurationMonths = sp("-1") }, "duration_months", MsgDurationMonths},
		{"cookie zero", func(p *ProgramInput) { p.CookieDuration = sp("0") }, "cookie_duration", MsgCookieDuration},
		{"cookie 366", func(p *ProgramInput) { p.CookieDuration = sp("366") }, "cookie_duration", MsgCookieDuration},
		{"cookie string", func(p *ProgramInput) { p.CookieDuration = sp(`"30"`) }, "cookie_duration", MsgCookieDuration},
		{"attribution window zero", func(p *ProgramInput) { p.AttributionWindowDays = sp("0") }, "attribution_window_days",
			"attribution_window_days must be a whole number of days from 1 to 3650"},
		{"bad lead policy", func(p *ProgramInput) { p.LeadAuthPolicy = sp("anyone") }, "lead_auth_policy",
			"lead_auth_policy must be one of: server_required, browser_allowed"},
		{"bad payment mode", func(p *ProgramInput) { p.PaymentTrackingMode = sp("cash") }, "payment_tracking_mode",
			"payment_tracking_mode must be one of: processor_connect, s2s"},
		{"origin with path", func(p *ProgramInput) {
			p.AllowedOrigins, p.AllowedOriginsSet = []string{"https://shop.example.com/cart"}, true
		}, "allowed_origins", msgOrigins},
		{"bad domain", func(p *ProgramInput) { p.Domain = sp("not a host") }, "domain", "domain must be a host name like shop.example.com"},
		{"currency in lower case", func(p *ProgramInput) { p.Currency = sp("usd") }, "currency", "currency must be one of: USD, EUR, VND"},
		{"currency unsupported", func(p *ProgramInput) { p.Currency = sp("GBP") }, "currency", MsgCurrency},
		{"currency empty", func(p *ProgramInput) { p.Currency = sp("") }, "currency", MsgCurrency},
		{"lead commission negative", func(p *ProgramInput) { p.LeadCommission = sp("-1") }, "lead_commission", "lead_commission must be a non-negative number"},
		{"lead commission a string", func(p *ProgramInput) { p.LeadCommission = sp(`"5"`) }, "lead_commission", MsgLeadCommission},
		{"lead commission a boolean", func(p *ProgramInput) { p.LeadCommission = sp("true") }, "lead_commission", MsgLeadCommission},
		{"lead commission too large", func(p *ProgramInput) { p.LeadCommission = sp("1e8") }, "lead_commission", "lead_commission is too large"},
		{"lead commission 3 decimals for USD (default)", func(p *ProgramInput) { p.LeadCommission = sp("2.505") }, "lead_commission",
			"lead_commission must have at most 2 decimals for USD"},
		{"lead commission 3 decimals for EUR", func(p *ProgramInput) {
			p.Currency, p.LeadCommission = sp("EUR"), sp("0.001")
		}, "lead_commission", "lead_commission must have at most 2 decimals for EUR"},
		{"lead commission with decimals for VND", func(p *ProgramInput) {
			p.Currency, p.LeadCommission = sp("VND"), sp("1000.5")
		}, "lead_commission", "lead_commission must have at most 0 decimals for VND"},
		{"fixed rate with decimals for VND", func(p *ProgramInput) {
			p.CommissionType, p.Currency = sp("fixed"), sp("VND")
		}, "commission_rate", "commission_rate must have at most 0 decimals for VND"},
		{"recurring fixed rate 3 decimals for USD", func(p *ProgramInput) {
			p.CommissionType, p.CommissionRate = sp("recurring_fixed"), sp("5.125")
		}, "commission_rate", "commission_rate must have at most 2 decimals for USD"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := validProgram()
			tc.mutate(&in)
			err := in.validateFields(true)
			if err == nil {
				p := Program{Currency: DefaultCurrency, LeadCommission: DefaultLeadCommission}
				err = in.apply(&p)
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("got %v, want a FieldError", err)
			}
			if fe.Field != tc.field || fe.Message != tc.msg {
				t.Fatalf("got field %q message %q, want %q %q", fe.Field, fe.Message, tc.field, tc.msg)
			}
			if !errors.Is(err, errkind.Invalid) {
				t.Fatal("field errors must be of kind ErrInvalid")
			}
		})
	}
}

func TestProgramInputAppliesAndCanonicalises(t *testing.T) {
	in := validProgram()
	in.CommissionRate = sp("12.50")
	in.Domain = sp(" Shop.Example.com ")
	in.AllowedOrigins, in.AllowedOriginsSet = []string{"HTTPS://Shop.Example.com", "https://shop.example.com/"}, true
	in.CookieDuration = sp("30.0")
	if err := in.validateFields(true); err != nil {
		t.Fatal(err)
	}
	p := Program{AttributionWindowDays: DefaultAttributionWindowDays}
	if err := in.apply(&p); err != nil {
		t.Fatal(err)
	}
	if p.CommissionRate != "12.5" || p.Domain != "shop.example.com" || p.AdvertiserID != 1 {
		t.Fatalf("got %+v", p)
	}
	if len(p.AllowedOrigins) != 1 || p.AllowedOrigins[0] != "https://shop.example.com" {
		t.Fatalf("origins %v", p.AllowedOrigins)
	}
	if p.CookieDuration == nil || *p.CookieDuration != 30 || p.AttributionWindowDays != 60 {
		t.Fatalf("cookie %v window %d", p.CookieDuration, p.AttributionWindowDays)
	}
}

func TestPatchChecksRateCapAgainstStoredType(t *testing.T) {
	in := ProgramInput{CommissionRate: sp("150")}
	if err := in.validateFields(false); err != nil {
		t.Fatalf("a fixed-amount rate of 150 is fine on its own: %v", err)
	}
	stored := Program{CommissionType: CommissionPercent, CommissionRate: "10"}
	if err := in.apply(&stored); err == nil || err.Error() != MsgCommissionRateCap {
		t.Fatalf("got %v, want the cap message for a percent program", err)
	}
	fixed := Program{CommissionType: CommissionFixed, CommissionRate: "10"}
	if err := in.apply(&fixed); err != nil || fixed.CommissionRate != "150" {
		t.Fatalf("fixed program: %v %q", err, fixed.CommissionRate)
	}
}

func TestLinkInputValidation(t *testing.T) {
	id := int64(3)
	for _, code := range []string{"", "has space", "ünï", string(make([]byte, 65))} {
		in := LinkInput{PartnerID: &id, Code: &code}
		if _, err := in.validate(1); !errors.Is(err, errkind.Invalid) {
			t.Errorf("code %q: got %v, want invalid", code, err)
		}
	}
	ok := "DEMO-1_x"
	l, err := LinkInput{PartnerID: &id, Code: &ok}.validate(9)
	if err != nil || !l.Active || l.ProgramID != 9 {
		t.Fatalf("got %+v %v, want an active link in program 9", l, err)
	}
}

func TestProgramMoneyFieldsApply(t *testing.T) {
	tests := []struct {
		name, ctype, rate, currency, lead string
		wantCurrency, wantLead            string
	}{
		{"defaults stay when not sent", "percent", "12.5", "", "", "USD", "0"},
		{"USD with cents", "fixed", "2.5", "USD", "2.50", "USD", "2.5"},
		{"EUR", "recurring_fixed", "10.99", "EUR", "0.01", "EUR", "0.01"},
		{"VND whole amounts", "fixed", "50000", "VND", "1000", "VND", "1000"},
		{"VND lead written as 1000.0", "percent", "12.5", "VND", "1000.0", "VND", "1000"},
		{"exponent read exactly", "percent", "12.5", "USD", "25e-1", "USD", "2.5"},
		{"percent rate keeps 4 decimals in VND", "percent", "12.3456", "VND", "0", "VND", "0"},
		{"zero lead", "percent", "10", "EUR", "0.00", "EUR", "0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := validProgram()
			in.CommissionType, in.CommissionRate = sp(tc.ctype), sp(tc.rate)
			if tc.currency != "" {
				in.Currency = sp(tc.currency)
			}
			if tc.lead != "" {
				in.LeadCommission = sp(tc.lead)
			}
			if err := in.validateFields(true); err != nil {
				t.Fatal(err)
			}
			p := Program{Currency: DefaultCurrency, LeadCommission: DefaultLeadCommission}
			if err := in.apply(&p); err != nil {
				t.Fatal(err)
			}
			if p.Currency != tc.wantCurrency || p.LeadCommission != tc.wantLead {
				t.Fatalf("currency %q lead %q, want %q %q", p.Currency, p.LeadCommission, tc.wantCurrency, tc.wantLead)
			}
		})
	}
}

// A patch is checked against the stored program: the currency's decimals
// apply to the stored lead reward and fixed rate when the patch changes the
// currency, the type or the amounts, and not when it changes something
// else (a program stored before currencies existed may have a fixed rate of
// 4 decimals).
func TestPatchChecksMoneyAgainstStoredProgram(t *testing.T) {
	tests := []struct {
		name    string
		stored  Program
		patch   ProgramInput
		field   string
		message string
	}{
		{"currency to VND with a lead in cents", Program{CommissionType: CommissionPercent, CommissionRate: "10", Currency: "USD", LeadCommission: "2.5"},
			ProgramInput{Currency: sp("VND")}, "lead_commission", "lead_commission must have at most 0 decimals for VND"},
		{"currency to VND with a fixed rate in cents", Program{CommissionType: CommissionFixed, CommissionRate: "4.99", Currency: "USD", LeadCommission: "0"},
			ProgramInput{Currency: sp("VND")}, "commission_rate", "commission_rate must have at most 0 decimals for VND"},
		{"type to fixed in VND", Program{CommissionType: CommissionPercent, CommissionRate: "12.5", Currency: "VND", LeadCommission: "0"},
			ProgramInput{CommissionType: sp("fixed")}, "commission_rate", "commission_rate must have at most 0 decimals for VND"},
		{"lead with cents in a VND program", Program{CommissionType: CommissionPercent, CommissionRate: "10", Currency: "VND", LeadCommission: "0"},
			ProgramInput{LeadCommission: sp("0.5")}, "lead_commission", "lead_commission must have at most 0 decimals for VND"},
		{"old fixed rate of 4 decimals, name changed", Program{CommissionType: CommissionFixed, CommissionRate: "5.1234", Currency: "USD", LeadCommission: "0"},
			ProgramInput{Name: sp("Renamed")}, "", ""},
		{"currency to EUR keeps a lead in cents", Program{CommissionType: CommissionPercent, CommissionRate: "10", Currency: "USD", LeadCommission: "2.5"},
			ProgramInput{Currency: sp("EUR")}, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.patch.validateFields(false); err != nil {
				t.Fatalf("field check: %v", err)
			}
			p := tc.stored
			err := tc.patch.apply(&p)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("got %v, want the patch applied", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || fe.Message != tc.message {
				t.Fatalf("got %v, want %s: %q", err, tc.field, tc.message)
			}
		})
	}
}

// An allowed origin is stored as a browser sends it in Origin (lower case,
// default port left out), and only a real origin is accepted: a value that
// can never equal an Origin header would leave the brand's tracker refused
// with no warning.
func TestNormalizeOrigins(t *testing.T) {
	got, err := normalizeOrigins([]string{
		"https://Shop.Example.com", "https://shop.example.com:443", "http://localhost:8000", "http://LOCALHOST:80/",
		"http://127.0.0.1:5173", "https://[::1]:8443", "https://xn--bcher-kva.example",
	})
	want := []string{"https://shop.example.com", "http://localhost:8000", "http://localhost", "http://127.0.0.1:5173", "https://[::1]:8443", "https://xn--bcher-kva.example"}
	if err != nil || len(got) != len(want) {
		t.Fatalf("normalizeOrigins = %q, %v; want %q", got, err, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("normalizeOrigins = %q; want %q", got, want)
		}
	}
	for _, bad := range []string{
		"https://(!$).example", "https://x.example:99999", "https://x.example:0", "https://x.example:", "https://..",
		"https://\xff(.example", "https://bücher.example", "https://-x.example", "https://x-.example", "https://a..b.example",
		"https://" + strings.Repeat("a", 64) + ".example", "ftp://x.example", "https://x.example/path", "https://u:p@x.example",
		"https://x.example?q", "https://", "x.example", "https://x.example:8a",
	} {
		if _, err := normalizeOrigins([]string{bad}); err == nil || err.Error() != msgOrigins {
			t.Errorf("normalizeOrigins(%q) = %v, want %q", bad, err, msgOrigins)
		}
	}
}
