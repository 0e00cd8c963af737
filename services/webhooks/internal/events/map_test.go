package events_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	"github.com/svc-dev/svc/services/webhooks/internal/events"
)

var (
	t0  = time.Date(2026, 11, 28, 9, 30, 15, 123456789, time.UTC)
	ts0 = timestamppb.New(t0)
	t1  = t0.Add(30 * 24 * time.Hour)
	ts1 = timestamppb.New(t1)
)

func envelope(t testing.TB, id, typ string, program int64, msg proto.Message) *eventsv1.Envelope {
	t.Helper()
	b, err := proto.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	return &eventsv1.Envelope{Id: id, Type: typ, OccurredAt: ts0, ProgramId: program, Payload: b}
}

// want is one expected webhook event: its row fields and its whole body
// (the data object; id, type, created_at and program_id are checked from
// the row fields).
type want struct {
	typ       string
	program   int64
	test      bool
	objectKey string
	data      string
}

func check(t *testing.T, env *eventsv1.Envelope, got []events.Event, wants []want) {
	t.Helper()
	if len(got) != len(wants) {
		t.Fatalf("%d events %+v, want %d", len(got), got, len(wants))
	}
	for i, w := range wants {
		e := got[i]
		if e.Type != w.typ || e.ProgramID != w.program || e.IsTest != w.test || e.ObjectKey != w.objectKey {
			t.Errorf("event %d: %s program %d test %v key %q, want %s program %d test %v key %q",
				i, e.Type, e.ProgramID, e.IsTest, e.ObjectKey, w.typ, w.program, w.test, w.objectKey)
		}
		if e.ID != events.EventID(env.GetId(), w.typ) || !strings.HasPrefix(e.ID, "evt_") || len(e.ID) != 36 {
			t.Errorf("event %d: id %q, want evt_ and 32 hex of the envelope id and type", i, e.ID)
		}
		if want := t0.Truncate(time.Millisecond); !e.CreatedAt.Equal(want) || e.CreatedAt.Location() != time.UTC {
			t.Errorf("event %d: created_at %s, want the envelope's to the millisecond, %s", i, e.CreatedAt, want)
		}
		body, err := e.Body()
		if err != nil {
			t.Fatal(err)
		}
		wantBody := `{"id":"` + e.ID + `","type":"` + w.typ + `","created_at":"2026-11-28T09:30:15.123Z","program_id":` +
			jsonInt(w.program) + `,"data":` + w.data + `}`
		if string(body) != wantBody {
			t.Errorf("event %d body:\n got %s\nwant %s", i, body, wantBody)
		}
		if !json.Valid(body) {
			t.Errorf("event %d: body is not JSON", i)
		}
	}
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }

type mapCase struct {
	name  string
	env   *eventsv1.Envelope
	wants []want
}

// mapCases is every source event the mapping reads (and some it ignores),
// with the webhook events each must give; the OpenAPI test validates the
// same events' bodies.
func mapCases(t testing.TB) []mapCase {
	const created = `"2026-11-28T09:30:15.123Z"`
	const later = `"2026-12-28T09:30:15.123Z"`
	return []mapCase{
		{
			name: "a settled lead is lead.created, keyed by its customer",
			env: envelope(t, "e-lead", eventsv1.TypeLeadRecorded, 7, &eventsv1.LeadRecorded{
				EventId: 41, CustomerId: 9, ClickId: "clk_1", ProgramId: 7, PartnerId: 3, CustomerKey: "cus_A", Status: "settled",
				ViaApiKey: true, EventName: "signup", RecordedAt: ts0, SignupDate: ts0,
			}),
			wants: []want{{events.TypeLeadCreated, 7, false, "lead:9",
				`{"id":41,"customer_id":9,"click_id":"clk_1","partner_id":3,"customer_key":"cus_A","event_name":"signup","status":"settled","test":false,"created_at":` + created + `}`}},
		},
		{
			name: "a provisional lead is no lead yet: nothing",
			env: envelope(t, "e-prov", eventsv1.TypeLeadRecorded, 7, &eventsv1.LeadRecorded{
				EventId: 42, CustomerId: 9, ClickId: "clk_1", ProgramId: 7, PartnerId: 3, Status: "provisional", RecordedAt: ts0,
			}),
		},
		{
			name: "a test lead without customer is a test lead.created keyed by itself, absent ids null",
			env: envelope(t, "e-tlead", eventsv1.TypeLeadRecorded, 7, &eventsv1.LeadRecorded{
				EventId: 43, ProgramId: 7, Status: "settled", IsTest: true, RecordedAt: ts0,
			}),
			wants: []want{{events.TypeLeadCreated, 7, true, "lead:e43",
				`{"id":43,"customer_id":null,"click_id":null,"partner_id":null,"customer_key":null,"event_name":null,"status":"settled","test":true,"created_at":` + created + `}`}},
		},
		{
			name: "a click is click.recorded, URLs unescaped",
			env: envelope(t, "e-click", eventsv1.TypeClickRecorded, 7, &eventsv1.ClickRecorded{
				EventId: 500, ClickId: "clk_2", CustomerId: 10, ProgramId: 7, LinkId: 4, PartnerId: 3, Code: "anna", NewCustomer: true,
				FirstPartnerId: 3, Country: "DE", Region: "BE", City: "Berlin", DeviceType: "desktop", Os: "Linux", Browser: "Firefox",
				PageUrl: "https://shop.example/?a=1&b=2", ReferrerUrl: "https://ref.example/", AffiliateUrl: "https://shop.example/?via=anna", ClickedAt: ts0,
			}),
			wants: []want{{events.TypeClickRecorded, 7, false, "click:500",
				`{"id":500,"click_id":"clk_2","customer_id":10,"new_customer":true,"link_id":4,"partner_id":3,"first_partner_id":3,"code":"anna","country":"DE","region":"BE","city":"Berlin","device_type":"desktop","os":"Linux","browser":"Firefox","page_url":"https://shop.example/?a=1&b=2","referrer_url":"https://ref.example/","affiliate_url":"https://shop.example/?via=anna","test":false,"created_at":` + created + `}`}},
		},
		{
			name: "a test click is a test click.recorded",
			env: envelope(t, "e-tclick", eventsv1.TypeClickRecorded, 7, &eventsv1.ClickRecorded{
				EventId: 501, ProgramId: 7, LinkId: 4, PartnerId: 3, Code: "anna", IsTest: true, ClickedAt: ts0,
			}),
			wants: []want{{events.TypeClickRecorded, 7, true, "click:501",
				`{"id":501,"click_id":null,"customer_id":null,"new_customer":false,"link_id":4,"partner_id":3,"first_partner_id":null,"code":"anna","country":"","region":"","city":"","device_type":"","os":"","browser":"","page_url":"","referrer_url":"","affiliate_url":"","test":true,"created_at":` + created + `}`}},
		},
		{
			name: "tracking's sale is not the sale: nothing",
			env: envelope(t, "e-tsale", eventsv1.TypeSaleRecorded, 7, &eventsv1.SaleRecorded{
				SaleId: 1, TransactionId: "tx", ProgramId: 7, AmountCents: 100, Currency: "USD", OccurredAt: ts0,
			}),
		},
		{
			name: "a visit: nothing",
			env:  envelope(t, "e-visit", eventsv1.TypeVisitRecorded, 7, &eventsv1.VisitRecorded{EventId: 1, ProgramId: 7}),
		},
		{
			name: "the ledger's sale is sale.created",
			env: envelope(t, "e-sale", eventsv1.TypeLedgerSaleRecorded, 7, &eventsv1.LedgerSaleRecorded{
				SaleId: 88, TransactionId: "pi_1", ProgramId: 7, CustomerId: 9, PartnerId: 3, AmountCents: 4999, Currency: "EUR",
				Source: "processor", OccurredAt: ts0,
			}),
			wants: []want{{events.TypeSaleCreated, 7, false, "sale:88",
				`{"id":88,"transaction_id":"pi_1","customer_id":9,"partner_id":3,"amount_cents":4999,"currency":"EUR","refunded_cents":0,"source":"processor","test":false,"occurred_at":` + created + `}`}},
		},
		{
			name: "a test-mode sale is a test sale.created",
			env: envelope(t, "e-tsale2", eventsv1.TypeLedgerSaleRecorded, 7, &eventsv1.LedgerSaleRecorded{
				SaleId: 89, TransactionId: "test_txn_1", ProgramId: 7, CustomerId: 9, AmountCents: 100, Currency: "USD",
				IsTest: true, Source: "api", OccurredAt: ts0,
			}),
			wants: []want{{events.TypeSaleCreated, 7, true, "sale:89",
				`{"id":89,"transaction_id":"test_txn_1","customer_id":9,"partner_id":null,"amount_cents":100,"currency":"USD","refunded_cents":0,"source":"api","test":true,"occurred_at":` + created + `}`}},
		},
		{
			name: "a partial refund is sale.refunded with the refund and the sale's refunded total",
			env: envelope(t, "e-refund", eventsv1.TypeRefundRecorded, 7, &eventsv1.RefundRecorded{
				RefundId: 5, SaleId: 88, TransactionId: "pi_1", ProgramId: 7, CommissionId: 12, ExternalRefundId: "re_1",
				RequestedCents: 1000, AmountCents: 1000, SaleRefundedCents: 1500, SaleCurrency: "EUR", Deduction: 100, Debited: 100,
				Currency: "EUR", Reason: "refund", CreatedAt: ts0,
			}),
			wants: []want{{events.TypeSaleRefunded, 7, false, "sale:88",
				`{"id":88,"transaction_id":"pi_1","currency":"EUR","refunded_cents":1500,"refund":{"id":5,"external_refund_id":"re_1","requested_cents":1000,"amount_cents":1000,"reason":"refund","commission":{"id":12,"deduction":100,"debited":100,"currency":"EUR"},"created_at":` + created + `}}`}},
		},
		{
			name: "a refund of a sale without commission has commission null",
			env: envelope(t, "e-refund2", eventsv1.TypeRefundRecorded, 7, &eventsv1.RefundRecorded{
				RefundId: 6, SaleId: 90, TransactionId: "pi_2", ProgramId: 7, AmountCents: 700, SaleRefundedCents: 700,
				SaleCurrency: "USD", Reason: "chargeback", CreatedAt: ts0,
			}),
			wants: []want{{events.TypeSaleRefunded, 7, false, "sale:90",
				`{"id":90,"transaction_id":"pi_2","currency":"USD","refunded_cents":700,"refund":{"id":6,"external_refund_id":null,"requested_cents":0,"amount_cents":700,"reason":"chargeback","commission":null,"created_at":` + created + `}}`}},
		},
		{
			name: "a pending commission is commission.created",
			env: envelope(t, "e-comm", eventsv1.TypeCommissionCreated, 7, &eventsv1.CommissionCreated{
				CommissionId: 12, SaleId: 88, ProgramId: 7, PartnerId: 3, CustomerId: 9, Kind: "sale", Status: "pending",
				Amount: 500, Currency: "EUR", HoldUntil: ts1, CreatedAt: ts0,
			}),
			wants: []want{{events.TypeCommissionCreated, 7, false, "commission:12",
				`{"id":12,"sale_id":88,"partner_id":3,"kind":"sale","status":"pending","amount":500,"currency":"EUR","refunded_amount":0,"customer_id":9,"hold_until":` + later + `,"created_at":` + created + `}`}},
		},
		{
			name: "a lead commission created approved is commission.created then commission.approved",
			env: envelope(t, "e-comm2", eventsv1.TypeCommissionCreated, 7, &eventsv1.CommissionCreated{
				CommissionId: 13, ProgramId: 7, PartnerId: 3, CustomerId: 9, Kind: "lead", Status: "approved",
				Amount: 250, Currency: "USD", HoldUntil: ts0, CreatedAt: ts0,
			}),
			wants: []want{
				{events.TypeCommissionCreated, 7, false, "commission:13",
					`{"id":13,"sale_id":null,"partner_id":3,"kind":"lead","status":"approved","amount":250,"currency":"USD","refunded_amount":0,"customer_id":9,"hold_until":` + created + `,"created_at":` + created + `}`},
				{events.TypeCommissionApproved, 7, false, "commission:13",
					`{"id":13,"sale_id":null,"partner_id":3,"kind":"lead","status":"approved","amount":250,"currency":"USD","refunded_amount":0,"approved_at":` + created + `}`},
			},
		},
		{
			name: "approval by the hold rule is commission.approved",
			env: envelope(t, "e-appr", eventsv1.TypeCommissionStatusChanged, 7, &eventsv1.CommissionStatusChanged{
				CommissionId: 12, SaleId: 88, ProgramId: 7, PartnerId: 3, FromStatus: "pending", ToStatus: "approved",
				Amount: 500, Currency: "EUR", Credited: true, ChangedAt: ts1,
			}),
			wants: []want{{events.TypeCommissionApproved, 7, false, "commission:12",
				`{"id":12,"sale_id":88,"partner_id":3,"kind":"sale","status":"approved","amount":500,"currency":"EUR","refunded_amount":0,"approved_at":` + later + `}`}},
		},
		{
			name: "a partial refund of the commission is commission.reversed with the deduction",
			env: envelope(t, "e-part", eventsv1.TypeCommissionStatusChanged, 7, &eventsv1.CommissionStatusChanged{
				CommissionId: 12, SaleId: 88, ProgramId: 7, PartnerId: 3, FromStatus: "approved", ToStatus: "refunded",
				Amount: 500, RefundedAmount: 100, Currency: "EUR", Deduction: 100, Credited: true, Reason: "refund", ChangedAt: ts1,
			}),
			wants: []want{{events.TypeCommissionReversed, 7, false, "commission:12",
				`{"id":12,"sale_id":88,"partner_id":3,"kind":"sale","status":"refunded","amount":500,"currency":"EUR","refunded_amount":100,"deduction":100,"reason":"refund","changed_at":` + later + `}`}},
		},
		{
			name: "a chargeback reversing the commission is commission.reversed with reason chargeback",
			env: envelope(t, "e-rev", eventsv1.TypeCommissionStatusChanged, 7, &eventsv1.CommissionStatusChanged{
				CommissionId: 12, SaleId: 88, ProgramId: 7, PartnerId: 3, FromStatus: "refunded", ToStatus: "reversed",
				Amount: 500, RefundedAmount: 500, Currency: "EUR", Deduction: 400, Credited: true, Reason: "chargeback", ChangedAt: ts1,
			}),
			wants: []want{{events.TypeCommissionReversed, 7, false, "commission:12",
				`{"id":12,"sale_id":88,"partner_id":3,"kind":"sale","status":"reversed","amount":500,"currency":"EUR","refunded_amount":500,"deduction":400,"reason":"chargeback","changed_at":` + later + `}`}},
		},
		{
			name: "a sale commission its program's payout covered is commission.paid with the payout",
			env: envelope(t, "e-paid", eventsv1.TypeCommissionPaid, 7, &eventsv1.CommissionPaid{
				CommissionId: 12, SaleId: 88, ProgramId: 7, PartnerId: 3, Kind: "sale", Status: "refunded",
				Amount: 500, RefundedAmount: 100, Currency: "EUR", WithdrawalId: 31, WithdrawalProgramId: 7, PaidAt: ts1,
			}),
			wants: []want{{events.TypeCommissionPaid, 7, false, "commission:12",
				`{"id":12,"sale_id":88,"partner_id":3,"kind":"sale","status":"refunded","amount":500,"currency":"EUR","refunded_amount":100,"payout_id":31,"paid_at":` + later + `}`}},
		},
		{
			name: "a lead commission its program's payout covered: commission.paid, sale_id null",
			env: envelope(t, "e-paid2", eventsv1.TypeCommissionPaid, 7, &eventsv1.CommissionPaid{
				CommissionId: 13, ProgramId: 7, PartnerId: 3, Kind: "lead", Status: "approved",
				Amount: 200, Currency: "EUR", WithdrawalId: 32, WithdrawalProgramId: 7, PaidAt: ts1,
			}),
			wants: []want{{events.TypeCommissionPaid, 7, false, "commission:13",
				`{"id":13,"sale_id":null,"partner_id":3,"kind":"lead","status":"approved","amount":200,"currency":"EUR","refunded_amount":0,"payout_id":32,"paid_at":` + later + `}`}},
		},
		{
			name: "a program payout's withdrawal entry is payout.paid",
			env: envelope(t, "e-bal", eventsv1.TypeBalanceChanged, 0, &eventsv1.BalanceChanged{
				EntryId: 70, PartnerId: 3, Currency: "EUR", Delta: -1200, Balance: 300, Kind: "withdrawal", WithdrawalId: 31,
				ProgramId: 7, CreatedAt: ts0,
			}),
			wants: []want{{events.TypePayoutPaid, 7, false, "payout:31",
				`{"id":31,"partner_id":3,"amount":1200,"currency":"EUR","status":"paid","paid_at":` + created + `}`}},
		},
		{
			name: "an admin withdrawal (no program) is told to no program",
			env: envelope(t, "e-bal2", eventsv1.TypeBalanceChanged, 0, &eventsv1.BalanceChanged{
				EntryId: 71, PartnerId: 3, Currency: "EUR", Delta: -1200, Kind: "withdrawal", WithdrawalId: 32, CreatedAt: ts0,
			}),
		},
		{
			name: "a credit entry: nothing",
			env: envelope(t, "e-bal3", eventsv1.TypeBalanceChanged, 0, &eventsv1.BalanceChanged{
				EntryId: 72, PartnerId: 3, Currency: "EUR", Delta: 500, Kind: "credit", CommissionId: 12, ProgramId: 7, CreatedAt: ts0,
			}),
		},
		{
			name: "withdrawal changed paid carries no program: nothing (the balance entry is payout.paid)",
			env: envelope(t, "e-wd", eventsv1.TypeWithdrawalChanged, 0, &eventsv1.WithdrawalChanged{
				WithdrawalId: 31, PartnerId: 3, Currency: "EUR", Amount: 1200, RequestedAmount: 1200, Status: "paid", Change: "paid", ChangedAt: ts0,
			}),
		},
		{
			name: "a notification: nothing",
			env:  envelope(t, "e-note", eventsv1.TypeNotificationCreated, 7, &eventsv1.NotificationCreated{NotificationId: 1}),
		},
	}
}

func TestMap(t *testing.T) {
	for _, c := range mapCases(t) {
		t.Run(c.name, func(t *testing.T) {
			got, err := events.Map(c.env, t1)
			if err != nil {
				t.Fatal(err)
			}
			check(t, c.env, got, c.wants)
			if events.Mapped(c.env.GetType()) != (c.env.GetType() != eventsv1.TypeSaleRecorded && c.env.GetType() != eventsv1.TypeVisitRecorded &&
				c.env.GetType() != eventsv1.TypeWithdrawalChanged && c.env.GetType() != eventsv1.TypeNotificationCreated) {
				t.Errorf("Mapped(%s) = %v", c.env.GetType(), events.Mapped(c.env.GetType()))
			}
		})
	}
}

// A payload that does not decode is an error (retried, then
// dead-lettered), never an event made of zero values.
func TestMapRefusesAPayloadThatDoesNotDecode(t *testing.T) {
	env := &eventsv1.Envelope{Id: "bad", Type: eventsv1.TypeCommissionCreated, OccurredAt: ts0, Payload: []byte{0xff, 0xff}}
	if evs, err := events.Map(env, t0); err == nil {
		t.Fatalf("events %+v, want an error", evs)
	}
}

// Without occurred_at an event is created at the clock's time.
func TestMapWithoutOccurredAtUsesNow(t *testing.T) {
	env := envelope(t, "e", eventsv1.TypeLedgerSaleRecorded, 7, &eventsv1.LedgerSaleRecorded{SaleId: 1, ProgramId: 7, OccurredAt: ts0})
	env.OccurredAt = nil
	evs, err := events.Map(env, t1)
	if err != nil || len(evs) != 1 || !evs[0].CreatedAt.Equal(t1.Truncate(time.Millisecond)) {
		t.Fatalf("%+v %v, want one event created at %s", evs, err, t1)
	}
}

func TestEventIDIsDeterministicPerEnvelopeAndType(t *testing.T) {
	a, b := events.EventID("e1", events.TypeCommissionCreated), events.EventID("e1", events.TypeCommissionCreated)
	if a != b {
		t.Fatalf("%s != %s", a, b)
	}
	for _, other := range []string{events.EventID("e1", events.TypeCommissionApproved), events.EventID("e2", events.TypeCommissionCreated)} {
		if other == a {
			t.Fatalf("another envelope or type gave the same id %s", a)
		}
	}
	if len(a) != 36 || !strings.HasPrefix(a, "evt_") || strings.Trim(a[4:], "0123456789abcdef") != "" {
		t.Fatalf("id %q, want evt_ and 32 lower-case hex digits", a)
	}
}

func TestEnrolled(t *testing.T) {
	pp := func(approved bool) *eventsv1.PartnerProgram {
		return &eventsv1.PartnerProgram{Id: 21, PartnerId: 3, ProgramId: 7, Approved: approved, CreatedAt: ts0}
	}
	env := &eventsv1.Envelope{Id: "e-pp", Type: eventsv1.TypePartnerProgramUpserted, OccurredAt: ts0, Seq: 50}
	cases := []struct {
		name     string
		approved bool
		prev     events.Enrolment
		want     bool
	}{
		{"a new approved enrolment", true, events.Enrolment{}, true},
		{"an unapproved enrolment approved by a newer event", true, events.Enrolment{Found: true, Approved: false, Seq: 40}, true},
		{"re-upserted while approved", true, events.Enrolment{Found: true, Approved: true, Seq: 40}, false},
		{"an older event than the record kept", true, events.Enrolment{Found: true, Approved: false, Seq: 60}, false},
		{"the same event replayed", true, events.Enrolment{Found: true, Approved: false, Seq: 50}, false},
		{"a new unapproved enrolment", false, events.Enrolment{}, false},
		{"approval withdrawn", false, events.Enrolment{Found: true, Approved: true, Seq: 40}, false},
		{"the svc test fixture partner's enrolment is a test event", true, events.Enrolment{Test: true}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := events.Enrolled(env, pp(c.approved), c.prev, t1)
			if !c.want {
				if len(got) != 0 {
					t.Fatalf("events %+v, want none", got)
				}
				return
			}
			check(t, env, got, []want{{events.TypePartnerEnrolled, 7, c.prev.Test, "partner:21",
				`{"id":21,"partner_id":3,"program_id":7,"approved":true,"test":` + strconv.FormatBool(c.prev.Test) + `,"created_at":"2026-11-28T09:30:15.123Z"}`}})
		})
	}
}

func TestFixtureProgram(t *testing.T) {
	for email, want := range map[string]int64{
		"test-partner+7@svc.invalid":                    7,
		"test-partner+9223372036854775807@svc.invalid":  9223372036854775807,
		"test-partner+07@svc.invalid":                   0,
		"test-partner+@svc.invalid":                     0,
		"test-partner+7@svc.invalid.example":            0,
		"test-partner+-7@svc.invalid":                   0,
		"test-partner+99999999999999999999@svc.invalid": 0,
		"partner+7@svc.invalid":                         0,
		"anna@shop.example":                             0,
	} {
		if got := events.FixtureProgram(email); got != want {
			t.Errorf("FixtureProgram(%q) = %d, want %d", email, got, want)
		}
	}
}
