package events_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/svc-dev/svc/api/openapivalidate"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
	"github.com/svc-dev/svc/services/webhooks/internal/events"
)

// Every body the mapping produces (a sample of every type, from every
// source event of the mapping test) is valid against the document's
// schema of its type under `webhooks:`, and the document lists a webhook
// for every type produced (and nothing the service cannot send but the
// test route's ping).
func TestBodiesMatchTheOpenAPIWebhooks(t *testing.T) {
	v, err := openapivalidate.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	validate := v.ValidateWebhook
	produced := map[string]bool{}
	for _, c := range mapCases(t) {
		evs, err := events.Map(c.env, t1)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			body, err := e.Body()
			if err != nil {
				t.Fatal(err)
			}
			if err := validate(e.Type, body); err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			produced[e.Type] = true
		}
	}
	env := &eventsv1.Envelope{Id: "e-pp", Type: eventsv1.TypePartnerProgramUpserted, OccurredAt: ts0, Seq: 5}
	pp := &eventsv1.PartnerProgram{Id: 21, PartnerId: 3, ProgramId: 7, Approved: true, CreatedAt: ts0}
	for _, e := range events.Enrolled(env, pp, events.Enrolment{}, t1) {
		body, err := e.Body()
		if err != nil {
			t.Fatal(err)
		}
		if err := validate(e.Type, body); err != nil {
			t.Error(err)
		}
		produced[e.Type] = true
	}
	ping := events.Event{ID: events.EventID("ping", events.TypePing), Type: events.TypePing, ProgramID: 7, CreatedAt: t0, Data: struct{}{}}
	body, err := ping.Body()
	if err != nil {
		t.Fatal(err)
	}
	if err := validate(events.TypePing, body); err != nil {
		t.Error(err)
	}
	produced[events.TypePing] = true

	var missing, extra []string
	for _, typ := range append(events.Types(), events.TypePing) {
		if !produced[typ] {
			missing = append(missing, typ)
		}
	}
	for _, typ := range v.WebhookTypes() {
		if !produced[typ] {
			extra = append(extra, typ)
		}
	}
	slices.Sort(extra)
	if len(missing) > 0 || len(extra) > 0 {
		t.Fatalf("types without a sample: %v; webhooks in the document the mapping never sends: %v", missing, extra)
	}

	// The check can fail: a body with a field the schema does not have, or
	// without one it requires, is refused.
	good := `{"id":"` + events.EventID("x", events.TypePayoutPaid) + `","type":"payout.paid","created_at":"2026-11-28T09:30:15.123Z","program_id":7,"data":{"id":1,"partner_id":2,"amount":3,"currency":"USD","status":"paid","paid_at":"2026-11-28T09:30:15.123Z"}}`
	if err := validate(events.TypePayoutPaid, []byte(good)); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{
		strings.Replace(good, `"status":"paid"`, `"status":"paid","extra":1`, 1),
		strings.Replace(good, `"amount":3,`, ``, 1),
		strings.Replace(good, `"currency":"USD"`, `"currency":"usd"`, 1),
		strings.Replace(good, `"id":"evt_`, `"id":"evt_x`, 1),
		strings.Replace(good, `"type":"payout.paid"`, `"type":"sale.created"`, 1),
	} {
		if validate(events.TypePayoutPaid, []byte(bad)) == nil {
			t.Errorf("body %s was accepted", bad)
		}
	}
}
