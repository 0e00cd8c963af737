package security_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/svc-dev/svc/api/openapivalidate"
	"github.com/svc-dev/svc/deploy/devstack/processorstub"
	"github.com/svc-dev/svc/libs/platform/platformtest"
)

// hook is one webhook a receiver got.
type hook struct {
	Header http.Header
	Body   []byte
	Event  struct {
		ID        string         `json:"id"`
		Type      string         `json:"type"`
		ProgramID int64          `json:"program_id"`
		CreatedAt string         `json:"created_at"`
		Data      map[string]any `json:"data"`
	}
}

// hookReceiver is a brand's endpoint: it keeps every webhook it gets and
// answers 200.
type hookReceiver struct {
	*httptest.Server
	mu  sync.Mutex
	got []hook
}

func newHookReceiver(t *testing.T) *hookReceiver {
	r := &hookReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		h := hook{Header: req.Header.Clone(), Body: body}
		if err := json.Unmarshal(body, &h.Event); err != nil {
			t.Errorf("a webhook that is not JSON: %s", body)
		}
		r.mu.Lock()
		r.got = append(r.got, h)
		r.mu.Unlock()
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *hookReceiver) hooks() []hook {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hook(nil), r.got...)
}

// waitTypes waits until the receiver got every type in want (as many of
// each as listed) and answers what it got.
func (r *hookReceiver) waitTypes(t *testing.T, want ...string) []hook {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := r.hooks()
		count := map[string]int{}
		for _, h := range got {
			count[h.Event.Type]++
		}
		need := map[string]int{}
		for _, w := range want {
			need[w]++
		}
		missing := []string{}
		for typ, n := range need {
			if count[typ] < n {
				missing = append(missing, fmt.Sprintf("%s (%d of %d)", typ, count[typ], n))
			}
		}
		if len(missing) == 0 {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("webhooks not received: %v; got %d: %v", missing, len(got), count)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Issue 22: every event type, produced by the real flow that causes it
// through the gateway, reaches the brand's endpoint signed (verified by the
// Standard Webhooks Go library with the secret the create route showed),
// with a body the OpenAPI `webhooks:` section describes; each event once,
// one object's events in order; another program's endpoint gets none of
// them, and test-mode sales go only to endpoints that ask for them.
func TestWebhooksFromTheRealFlow(t *testing.T) {
	t.Parallel()
	clock := platformtest.NewClock(time.Now().UTC())
	const processorSecret = "whsec_hooks_flow_processor_0123456789"
	e := startOn(t, clock, map[string]string{"SETTINGS_RATE_LIMIT": "1000", "DELIVERY_POLL_INTERVAL": "50ms", "PROCESSOR_WEBHOOK_SECRET": processorSecret},
		"accounts", "tracking", "commissions", "webhooks")
	a := e.keyedProgram("HooksA", map[string]any{"hold_days": 30})
	// A's payment processor account: its payments and disputes come from
	// the stand-in processor, signed, through the gateway.
	const account = "acct_hooks_flow_a"
	e.admin("PATCH", fmt.Sprintf("/admin/v1/programs/%d", a.id), map[string]any{
		"processor_connection": map[string]any{"status": "connected", "account_id": account}})
	processor := processorstub.New(processorstub.Config{WebhookSecret: processorSecret, Now: clock.Now})
	processor.SetWebhook(e.Gateway + "/api/v1/webhooks/processor")
	b := e.keyedProgram("HooksB", nil)
	testKey, _ := e.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/keys", a.id), map[string]any{"test": true})["key"].(string)
	session := func(uid int64) string {
		tok, _ := e.admin("POST", "/admin/v1/sessions", map[string]any{"user_id": uid})["token"].(string)
		return tok
	}
	person := func(email string, prog int64) int64 {
		uid := e.id("POST", "/admin/v1/users", map[string]any{"email": email})
		e.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/members", prog), map[string]any{"user_id": uid, "active": true,
			"permissions": []string{"tracking:read", "tracking:write"}})
		return uid
	}
	uidA := person("owner@hooksa.example", a.id)
	ownerA, ownerB := session(uidA), session(person("owner@hooksb.example", b.id))
	e.sync()

	all := []string{"lead.created", "sale.created", "sale.refunded", "commission.created", "commission.approved",
		"commission.reversed", "commission.paid", "partner.enrolled", "payout.paid", "click.recorded"}
	recvA, recvB, recvTest := newHookReceiver(t), newHookReceiver(t), newHookReceiver(t)
	create := func(token string, prog int64, url string, includeTest bool) string {
		r := e.client("203.0.113.60").withKey(token).do("POST", fmt.Sprintf("/api/v1/programs/%d/webhooks", prog),
			map[string]any{"url": url, "events": all, "include_test": includeTest}).want(t, 201)
		return r.str("data", "secret")
	}
	secretA := create(ownerA, a.id, recvA.URL, false)
	create(ownerB, b.id, recvB.URL, false)
	create(ownerA, a.id, recvTest.URL, true)

	// partner.enrolled: the partner joins A after the endpoint exists.
	partner := e.id("POST", "/admin/v1/partners", map[string]any{"name": "Hook Partner", "email": "hook-partner@partners.example"})
	e.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/partners", a.id), map[string]any{"partner_id": partner, "approved": true})
	e.admin("POST", fmt.Sprintf("/admin/v1/programs/%d/links", a.id), map[string]any{"partner_id": partner, "code": "HOOKSA", "active": true})
	e.sync()

	visitor := e.client("203.0.113.61")
	click := func() string {
		return visitor.do("POST", "/api/v1/track/click", map[string]any{"affiliate_url": "https://hooksa.example/?via=HOOKSA"}).want(t, 200).str("click_id")
	}
	server := e.client("203.0.113.62").withKey(a.key)
	// lead.created, then two sales (sale.created, commission.created).
	leadClick := click()
	server.do("POST", "/api/v1/track/lead", map[string]any{"click_id": leadClick, "customer_key": uniqueID("cust")}).want(t, 200)
	order1, order2 := uniqueID("hook_order"), uniqueID("hook_order")
	server.do("POST", "/api/v1/track/sale", map[string]any{"transaction_id": order1, "amount_cents": 10000, "currency": "USD", "click_id": click()}).want(t, 200)
	server.do("POST", "/api/v1/track/sale", map[string]any{"transaction_id": order2, "amount_cents": 5000, "currency": "USD", "click_id": click()}).want(t, 200)
	// A test-mode sale: only the endpoint with include_test gets it.
	testOrder := uniqueID("hook_test")
	e.client("203.0.113.63").withKey(testKey).do("POST", "/api/v1/track/sale", map[string]any{"transaction_id": testOrder, "amount_cents": 700, "currency": "USD", "click_id": click()}).want(t, 200)
	// A processor payment, then a dispute of it lost: the chargeback is
	// sale.refunded and commission.reversed (reason chargeback) of the
	// pending commission, which the hold rule then leaves alone.
	ds, err := processor.Send(context.Background(), processorstub.Payment{Account: account, Amount: 4000, Currency: "usd", ClickID: click(), Dispute: "lost"})
	if err != nil || len(ds) != 3 {
		t.Fatalf("processor deliveries %+v: %v", ds, err)
	}
	for i, outcome := range []string{"sale_recorded", "dispute_opened", "dispute_lost"} {
		var answer struct{ Outcome string }
		if ds[i].Status != 200 || json.Unmarshal(ds[i].Answer, &answer) != nil || answer.Outcome != outcome {
			t.Fatalf("processor event %s answered %d %s, want outcome %s", ds[i].Type, ds[i].Status, ds[i].Answer, outcome)
		}
	}
	recvA.waitTypes(t, "partner.enrolled", "lead.created", "sale.created", "sale.created", "sale.created", "commission.created",
		"commission.created", "commission.created", "sale.refunded", "commission.reversed")

	// commission.approved by the hold rule: 30 days later.
	// Every attempt recorded first: one still in flight when the clock
	// jumps a month would find its lease long over and be made again (the
	// same webhook-id twice, which at least once allows but this test
	// counts).
	deadline := time.Now().Add(30 * time.Second)
	for e.countRows("webhooks", `SELECT count(*) FROM webhooks.deliveries WHERE status = 'pending'`) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("deliveries still pending 30 s after they were received")
		}
		time.Sleep(20 * time.Millisecond)
	}
	clock.Advance(31 * 24 * time.Hour)
	e.admin("POST", "/admin/v1/commissions/approve-due", nil)
	recvA.waitTypes(t, "commission.approved", "commission.approved")
	// A partial refund of order 1, a full one of order 2: sale.refunded and
	// commission.reversed each.
	server.do("POST", "/api/v1/track/refund", map[string]any{"transaction_id": order1, "refund_amount_cents": 2500, "refund_id": uniqueID("re")}).want(t, 200)
	server.do("POST", "/api/v1/track/refund", map[string]any{"transaction_id": order2}).want(t, 200)
	// payout.paid: the owner (signed in again: a month went by) pays the
	// partner's balance from the console.
	ownerA = session(uidA)
	payout := e.client("203.0.113.64").withKey(ownerA).do("POST", fmt.Sprintf("/api/v1/programs/%d/payouts", a.id),
		map[string]any{"partner_id": partner, "currency": "USD"}).want(t, 201)
	e.client("203.0.113.64").withKey(ownerA).do("POST", fmt.Sprintf("/api/v1/programs/%d/payouts/%d/pay", a.id, int64(payout.get("data", "id").(float64))),
		map[string]any{"reference": "tr_hooks"}).want(t, 200)
	want := []string{"partner.enrolled", "click.recorded", "click.recorded", "click.recorded", "click.recorded", "click.recorded", "lead.created",
		"sale.created", "sale.created", "sale.created", "commission.created", "commission.created", "commission.created",
		"commission.approved", "commission.approved", "sale.refunded", "sale.refunded", "sale.refunded",
		"commission.reversed", "commission.reversed", "commission.reversed", "payout.paid", "commission.paid"}
	got := recvA.waitTypes(t, want...)

	v, err := openapivalidate.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	wh, err := standardwebhooks.NewWebhook(secretA)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	// Per commission, the order of its events' types.
	commissions := map[float64][]string{}
	for _, h := range got {
		// The clock was moved: the library's tolerance reads the real one.
		if err := wh.VerifyIgnoringTimestamp(h.Body, h.Header); err != nil {
			t.Errorf("%s %s: signature: %v", h.Event.Type, h.Event.ID, err)
		}
		if h.Header.Get("webhook-id") != h.Event.ID || !strings.HasPrefix(h.Event.ID, "evt_") {
			t.Errorf("webhook-id %q for event %q", h.Header.Get("webhook-id"), h.Event.ID)
		}
		if err := v.ValidateWebhook(h.Event.Type, h.Body); err != nil {
			t.Error(err)
		}
		if h.Event.ProgramID != a.id {
			t.Errorf("%s of program %d at A's endpoint", h.Event.Type, h.Event.ProgramID)
		}
		if seen[h.Event.ID] {
			t.Errorf("event %s (%s) delivered twice", h.Event.ID, h.Event.Type)
		}
		seen[h.Event.ID] = true
		if strings.HasPrefix(h.Event.Type, "commission.") {
			id, _ := h.Event.Data["id"].(float64)
			commissions[id] = append(commissions[id], h.Event.Type)
		}
		if h.Event.Type == "sale.created" && h.Event.Data["transaction_id"] == testOrder {
			t.Errorf("the test-mode sale reached an endpoint without include_test")
		}
	}
	// Exactly the events the flow causes, no more.
	count := map[string]int{}
	for _, h := range got {
		count[h.Event.Type]++
	}
	for _, typ := range want {
		count[typ]--
	}
	for typ, n := range count {
		if n != 0 {
			t.Errorf("%d more %s than the flow causes", n, typ)
		}
	}
	// Each sale's transaction id, and the hooks of each type.
	saleTx := map[float64]any{}
	byType := map[string][]hook{}
	for _, h := range got {
		if h.Event.Type == "sale.created" {
			saleTx[h.Event.Data["id"].(float64)] = h.Event.Data["transaction_id"]
		}
		byType[h.Event.Type] = append(byType[h.Event.Type], h)
	}
	// One object's events in order: per commission, by its sale's order.
	wantOrder := map[any]string{
		order1: "commission.created,commission.approved,commission.reversed,commission.paid",
		order2: "commission.created,commission.approved,commission.reversed",
		// The processor's payment: the chargeback cancelled it pending.
		"pi_local000001": "commission.created,commission.reversed",
	}
	if len(commissions) != len(wantOrder) {
		t.Fatalf("events of %d commissions, want %d: %v", len(commissions), len(wantOrder), commissions)
	}
	commissionSale := map[float64]any{}
	for _, h := range got {
		if strings.HasPrefix(h.Event.Type, "commission.") {
			sale, _ := h.Event.Data["sale_id"].(float64)
			commissionSale[h.Event.Data["id"].(float64)] = saleTx[sale]
		}
	}
	for id, types := range commissions {
		if strings.Join(types, ",") != wantOrder[commissionSale[id]] {
			t.Errorf("commission %v (sale %v): events in the order %v", id, commissionSale[id], types)
		}
	}
	// The chargeback: a processor sale, refunded whole with reason
	// chargeback, its commission reversed with the same reason.
	for _, h := range byType["sale.created"] {
		if h.Event.Data["transaction_id"] == "pi_local000001" && h.Event.Data["source"] != "processor" {
			t.Errorf("processor sale %s", h.Body)
		}
	}
	var chargebacks int
	for _, h := range byType["sale.refunded"] {
		if refund, _ := h.Event.Data["refund"].(map[string]any); refund["reason"] == "chargeback" {
			chargebacks++
			if h.Event.Data["transaction_id"] != "pi_local000001" || refund["amount_cents"] != float64(4000) {
				t.Errorf("chargeback %s", h.Body)
			}
		}
	}
	for _, h := range byType["commission.reversed"] {
		if h.Event.Data["reason"] == "chargeback" {
			chargebacks++
			if h.Event.Data["status"] != "reversed" || h.Event.Data["amount"] != float64(400) {
				t.Errorf("chargeback's commission.reversed %s", h.Body)
			}
		}
	}
	if chargebacks != 2 {
		t.Errorf("%d chargeback events, want sale.refunded and commission.reversed", chargebacks)
	}
	paid := byType["payout.paid"][0]
	// 10,000 + 5,000 at 10 %, less 250 (a quarter of order 1) and 500 (all
	// of order 2): 750 cents paid.
	if paid.Event.Data["amount"] != float64(750) || paid.Event.Data["currency"] != "USD" || paid.Event.Data["partner_id"] != float64(partner) {
		t.Errorf("payout.paid %s", paid.Body)
	}
	// The payout covered order 1's commission (750 left of 1,000); order
	// 2's was refunded to nothing and is not paid.
	cp := byType["commission.paid"][0]
	if cp.Event.Data["payout_id"] != paid.Event.Data["id"] || cp.Event.Data["amount"] != float64(1000) ||
		cp.Event.Data["refunded_amount"] != float64(250) || cp.Event.Data["status"] != "refunded" {
		t.Errorf("commission.paid %s after payout.paid %s", cp.Body, paid.Body)
	}
	// The test endpoint got the test sale; B's endpoint got nothing of A's.
	testGot := recvTest.waitTypes(t, "sale.created", "sale.created", "sale.created", "sale.created")
	var sawTest bool
	for _, h := range testGot {
		sawTest = sawTest || (h.Event.Type == "sale.created" && h.Event.Data["transaction_id"] == testOrder)
	}
	if !sawTest {
		t.Error("the endpoint with include_test did not get the test-mode sale")
	}
	if n := len(recvB.hooks()); n != 0 {
		t.Fatalf("B's endpoint got %d of A's webhooks", n)
	}
}
