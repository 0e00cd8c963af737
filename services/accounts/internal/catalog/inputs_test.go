package catalog

import (
	"errors"
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
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := validProgram()
			tc.mutate(&in)
			err := in.validateFields(true)
			if err == nil {
				p := Program{}
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
