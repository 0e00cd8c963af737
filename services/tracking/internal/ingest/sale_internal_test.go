package ingest

import (
	"errors"
	"testing"
	"time"
)

// attribute is the sale rules: a table over status, provisional leads,
// settling and the window's edges.
func TestAttribute(t *testing.T) {
	click := time.Date(2026, 10, 1, 12, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	base := Customer{ProgramID: 7, Status: "click", FirstClickAt: click, PartnerLinked: true,
		Program: Program{ID: 7, AttributionWindowDays: 30}}
	sale := func(at time.Time) *SaleWrite { return &SaleWrite{TransactionID: "t", AmountCents: 1, OccurredAt: at} }
	with := func(f func(*Customer)) Customer { c := base; f(&c); return c }

	cases := []struct {
		name     string
		c        Customer
		program  int64
		sale     *SaleWrite
		settle   bool
		want     PaymentDecision
		wantKind error
	}{
		{"other program", base, 8, sale(click), false, PaymentDecision{}, ErrNoAttribution},
		{"no partner-program", with(func(c *Customer) { c.PartnerLinked = false }), 7, sale(click), false, PaymentDecision{}, ErrNoAttribution},
		{"click, paid at the window's last instant", base, 7, sale(click.Add(30 * day)), false, PaymentDecision{Convert: true}, nil},
		{"click, paid one second past the window", base, 7, sale(click.Add(30*day + time.Second)), false, PaymentDecision{}, ErrNoAttribution},
		{"lead: signup is the reference, not the payment", with(func(c *Customer) { c.Status = "lead"; c.SignupDate = click.Add(29 * day) }),
			7, sale(click.Add(300 * day)), false, PaymentDecision{Convert: true}, nil},
		{"lead: signup past the window", with(func(c *Customer) { c.Status = "lead"; c.SignupDate = click.Add(31 * day) }),
			7, sale(click.Add(31 * day)), false, PaymentDecision{}, ErrNoAttribution},
		{"conversion: never re-checked, not converted again", with(func(c *Customer) { c.Status = "conversion"; c.SignupDate = click.Add(400 * day) }),
			7, sale(click.Add(900 * day)), false, PaymentDecision{}, nil},
		{"provisional: sale kept, customer unchanged", with(func(c *Customer) { c.HasProvisional = true }),
			7, sale(click.Add(day)), false, PaymentDecision{}, nil},
		{"provisional settled by the processor, then converted", with(func(c *Customer) { c.HasProvisional = true }),
			7, sale(click.Add(day)), true, PaymentDecision{SettleLead: true, Convert: true}, nil},
		{"provisional settled by a payment of nothing", with(func(c *Customer) { c.HasProvisional = true }),
			7, nil, true, PaymentDecision{SettleLead: true}, nil},
		{"no partner-program does not stop settling without a sale", with(func(c *Customer) { c.HasProvisional = true; c.PartnerLinked = false }),
			7, nil, true, PaymentDecision{SettleLead: true}, nil},
		{"default window (60) when the program has none", with(func(c *Customer) { c.Program.AttributionWindowDays = 0 }),
			7, sale(click.Add(59 * day)), false, PaymentDecision{Convert: true}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := attribute(tc.c, tc.program, tc.sale, tc.settle)
			if !errors.Is(err, tc.wantKind) || (tc.wantKind == nil && err != nil) {
				t.Fatalf("err %v, want kind %v", err, tc.wantKind)
			}
			if err != nil {
				return
			}
			if got.SettleLead != tc.want.SettleLead || got.Convert != tc.want.Convert || (got.Sale == nil) != (tc.sale == nil) {
				t.Fatalf("decision %+v, want %+v", got, tc.want)
			}
		})
	}
}
