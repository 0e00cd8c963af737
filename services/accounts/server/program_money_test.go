package server_test

import (
	"context"
	"encoding/json"
	"testing"

	"google.golang.org/protobuf/proto"

	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
)

// lastProgramEvent decodes the newest catalog.program.upserted event of the
// outbox.
func (s *stack) lastProgramEvent() *eventsv1.Program {
	s.t.Helper()
	var payload []byte
	if err := s.pool.QueryRow(context.Background(), `SELECT payload FROM outbox WHERE event_type = $1 ORDER BY id DESC LIMIT 1`,
		eventsv1.TypeProgramUpserted).Scan(&payload); err != nil {
		s.t.Fatal(err)
	}
	var env eventsv1.Envelope
	if err := proto.Unmarshal(payload, &env); err != nil {
		s.t.Fatal(err)
	}
	var p eventsv1.Program
	if err := proto.Unmarshal(env.GetPayload(), &p); err != nil {
		s.t.Fatal(err)
	}
	return &p
}

// answeredMoney reads currency and lead_commission of a program answer; the
// lead reward must be a JSON number, and is returned as its exact text.
func answeredMoney(t *testing.T, r reply) (currency, lead string) {
	t.Helper()
	var body struct {
		Data struct {
			Currency       *string          `json:"currency"`
			LeadCommission *json.RawMessage `json:"lead_commission"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(r.raw), &body); err != nil || body.Data.Currency == nil || body.Data.LeadCommission == nil {
		t.Fatalf("no currency or lead_commission in %s (%v)", r.raw, err)
	}
	raw := string(*body.Data.LeadCommission)
	if _, ok := catalog.JSONNumber(raw); !ok {
		t.Fatalf("lead_commission %s is not a JSON number", raw)
	}
	return *body.Data.Currency, raw
}

// storedMoney reads what accounts stored for the program.
func (s *stack) storedMoney(id int64) (currency, lead string) {
	s.t.Helper()
	if err := s.pool.QueryRow(context.Background(), `SELECT currency, lead_commission::text FROM programs WHERE id = $1`, id).
		Scan(&currency, &lead); err != nil {
		s.t.Fatal(err)
	}
	return currency, lead
}

// The program's currency (USD, EUR or VND, default USD) and its fixed lead
// reward (major units, default 0) are set on create and patch, stored,
// answered by the admin reads and carried by the catalog event.
func TestProgramCurrencyAndLeadCommission(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	r := s.admin("POST", "/admin/v1/advertisers", `{"name":"Money","email":"money@brand.example"}`)
	adv := itoa(dataID(t, r))

	cases := []struct {
		name, extra              string
		wantCurrency, wantLead   string // in the answer and the event
		wantStoredLead           string // numeric(12,4) text
		ctype, rate, wantEvtRate string
	}{
		{"defaults: USD and no lead reward", ``, "USD", "0", "0.0000", "percent", "12.5", "12.5000"},
		{"USD with a lead reward in cents", `,"currency":"USD","lead_commission":2.50`, "USD", "2.5", "2.5000", "fixed", "4.99", "4.9900"},
		{"EUR", `,"currency":"EUR","lead_commission":0.01`, "EUR", "0.01", "0.0100", "recurring_fixed", "10", "10.0000"},
		{"VND in whole dong", `,"currency":"VND","lead_commission":50000`, "VND", "50000", "50000.0000", "fixed", "120000", "120000.0000"},
		{"VND with a percent rate of decimals", `,"currency":"VND","lead_commission":0`, "VND", "0", "0.0000", "percent", "12.5", "12.5000"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := s.admin("POST", "/admin/v1/programs", `{"advertiser_id":`+adv+`,"name":"P`+itoa(int64(i))+`","domain":"brand.example",`+
				`"commission_type":"`+tc.ctype+`","commission_rate":`+tc.rate+tc.extra+`}`)
			if r.status != 201 {
				t.Fatalf("create: %d %s", r.status, r.raw)
			}
			id := dataID(t, r)
			if c, lead := s.storedMoney(id); c != tc.wantCurrency || lead != tc.wantStoredLead {
				t.Fatalf("stored %s %s, want %s %s", c, lead, tc.wantCurrency, tc.wantStoredLead)
			}
			r = s.admin("GET", "/admin/v1/programs/"+itoa(id), "")
			if c, lead := answeredMoney(t, r); r.status != 200 || c != tc.wantCurrency || lead != tc.wantLead {
				t.Fatalf("get: %d %s, want currency %s lead_commission %s", r.status, r.raw, tc.wantCurrency, tc.wantLead)
			}
			ev := s.lastProgramEvent()
			if ev.GetId() != id || ev.GetCurrency() != tc.wantCurrency || ev.GetLeadCommission() != tc.wantLead {
				t.Fatalf("event %d currency %q lead %q, want %d %q %q", ev.GetId(), ev.GetCurrency(), ev.GetLeadCommission(), id, tc.wantCurrency, tc.wantLead)
			}
		})
	}

	// The advertiser's program list answers them too.
	r = s.admin("GET", "/admin/v1/programs?advertiser_id="+adv, "")
	list, _ := r.body["data"].([]any)
	if r.status != 200 || len(list) != len(cases) {
		t.Fatalf("list: %d %s", r.status, r.raw)
	}
	if p := list[3].(map[string]any); p["currency"] != "VND" || p["lead_commission"] != float64(50000) {
		t.Fatalf("listed %v", p)
	}

	// A patch changes either, answers a catalog sequence and publishes the
	// new state.
	r = s.admin("POST", "/admin/v1/programs", `{"advertiser_id":`+adv+`,"name":"Patched","domain":"brand.example","commission_type":"percent","commission_rate":10}`)
	id := dataID(t, r)
	prog := "/admin/v1/programs/" + itoa(id)
	patches := []struct {
		name, body, currency, lead string
	}{
		{"currency to EUR", `{"currency":"EUR"}`, "EUR", "0"},
		{"lead reward in cents", `{"lead_commission":1.25}`, "EUR", "1.25"},
		{"both, to VND", `{"currency":"VND","lead_commission":20000}`, "VND", "20000"},
		{"lead back to none", `{"lead_commission":0}`, "VND", "0"},
		{"other fields leave them", `{"hold_days":7}`, "VND", "0"},
	}
	for _, tc := range patches {
		t.Run("patch "+tc.name, func(t *testing.T) {
			r := s.admin("PATCH", prog, tc.body)
			if r.status != 200 || r.header.Get("X-Catalog-Seq") == "" {
				t.Fatalf("patch: %d %s", r.status, r.raw)
			}
			r = s.admin("GET", prog, "")
			if c, lead := answeredMoney(t, r); c != tc.currency || lead != tc.lead {
				t.Fatalf("got %s, want %s %s", r.raw, tc.currency, tc.lead)
			}
			if ev := s.lastProgramEvent(); ev.GetId() != id || ev.GetCurrency() != tc.currency || ev.GetLeadCommission() != tc.lead {
				t.Fatalf("event currency %q lead %q", ev.GetCurrency(), ev.GetLeadCommission())
			}
		})
	}
}

// Bad currencies and lead rewards answer 400 naming the field, and write
// nothing: no program, no change, no event.
func TestProgramMoneyValidationWritesNothing(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	ids := s.seedCatalog() // percent 15, USD
	adv := itoa(ids.advertiser)
	r := s.admin("POST", "/admin/v1/programs", `{"advertiser_id":`+adv+`,"name":"Cents","domain":"brand.example","commission_type":"percent","commission_rate":10,"lead_commission":2.5}`)
	if r.status != 201 {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	cents := "/admin/v1/programs/" + itoa(dataID(t, r))
	create := func(extra string) string {
		return `{"advertiser_id":` + adv + `,"name":"x","domain":"x.example","commission_type":"percent","commission_rate":10` + extra + `}`
	}
	createFixed := func(rate, extra string) string {
		return `{"advertiser_id":` + adv + `,"name":"x","domain":"x.example","commission_type":"fixed","commission_rate":` + rate + extra + `}`
	}
	const badCurrency = "currency must be one of: USD, EUR, VND"
	const badLead = "lead_commission must be a non-negative number"
	cases := []struct {
		name, method, path, body string
		field, msg               string
	}{
		{"unknown currency", "POST", "/admin/v1/programs", create(`,"currency":"GBP"`), "currency", badCurrency},
		{"lower-case currency", "POST", "/admin/v1/programs", create(`,"currency":"usd"`), "currency", badCurrency},
		{"empty currency", "POST", "/admin/v1/programs", create(`,"currency":""`), "currency", badCurrency},
		{"currency not a string", "POST", "/admin/v1/programs", create(`,"currency":840`), "currency", "currency must be a string"},
		{"patch unknown currency", "PATCH", cents, `{"currency":"JPY"}`, "currency", badCurrency},
		{"negative lead", "POST", "/admin/v1/programs", create(`,"lead_commission":-1`), "lead_commission", badLead},
		{"lead as a string", "POST", "/admin/v1/programs", create(`,"lead_commission":"5"`), "lead_commission", badLead},
		{"lead not a number", "POST", "/admin/v1/programs", create(`,"lead_commission":"five"`), "lead_commission", badLead},
		{"lead too large", "POST", "/admin/v1/programs", create(`,"lead_commission":100000000`), "lead_commission", "lead_commission is too large"},
		{"lead 3 decimals in USD", "POST", "/admin/v1/programs", create(`,"lead_commission":2.505`), "lead_commission", "lead_commission must have at most 2 decimals for USD"},
		{"lead 3 decimals in EUR", "POST", "/admin/v1/programs", create(`,"currency":"EUR","lead_commission":0.001`), "lead_commission", "lead_commission must have at most 2 decimals for EUR"},
		{"lead with decimals in VND", "POST", "/admin/v1/programs", create(`,"currency":"VND","lead_commission":1000.5`), "lead_commission", "lead_commission must have at most 0 decimals for VND"},
		{"patch negative lead", "PATCH", cents, `{"lead_commission":-0.01}`, "lead_commission", badLead},
		{"patch to VND with a lead in cents", "PATCH", cents, `{"currency":"VND"}`, "lead_commission", "lead_commission must have at most 0 decimals for VND"},
		{"fixed rate 3 decimals in USD", "POST", "/admin/v1/programs", createFixed("4.995", ""), "commission_rate", "commission_rate must have at most 2 decimals for USD"},
		{"fixed rate with decimals in VND", "POST", "/admin/v1/programs", createFixed("12.5", `,"currency":"VND"`), "commission_rate", "commission_rate must have at most 0 decimals for VND"},
		{"patch percent 15 program to fixed 2.505", "PATCH", "/admin/v1/programs/" + itoa(ids.program), `{"commission_type":"fixed","commission_rate":2.505}`, "commission_rate", "commission_rate must have at most 2 decimals for USD"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			programs, outbox := s.count("programs"), s.count("outbox")
			var before string
			if err := s.pool.QueryRow(context.Background(), `SELECT string_agg(concat_ws(',', id, commission_type, commission_rate, currency, lead_commission, updated_at), ';' ORDER BY id) FROM programs`).Scan(&before); err != nil {
				t.Fatal(err)
			}
			r := s.admin(tc.method, tc.path, tc.body)
			wantError(t, r, 400, "BadRequestError", tc.msg)
			details := r.body["error"].(map[string]any)["details"].(map[string]any)
			if details["field"] != tc.field {
				t.Fatalf("details.field %v, want %s", details["field"], tc.field)
			}
			if r.header.Get("X-Catalog-Seq") != "" {
				t.Fatal("a refused write must not answer a catalog sequence")
			}
			if n := s.count("programs"); n != programs {
				t.Fatalf("programs %d -> %d", programs, n)
			}
			if n := s.count("outbox"); n != outbox {
				t.Fatalf("outbox %d -> %d", outbox, n)
			}
			var after string
			if err := s.pool.QueryRow(context.Background(), `SELECT string_agg(concat_ws(',', id, commission_type, commission_rate, currency, lead_commission, updated_at), ';' ORDER BY id) FROM programs`).Scan(&after); err != nil {
				t.Fatal(err)
			}
			if after != before {
				t.Fatalf("programs changed:\n%s\n%s", before, after)
			}
		})
	}
}
