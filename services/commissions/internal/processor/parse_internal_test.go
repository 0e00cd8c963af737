package processor

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// eventOf reads a fixture of testdata as a verified event.
func eventOf(t *testing.T, name string) Event {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var env struct {
		ID, Type, Account string
		Data              struct{ Object json.RawMessage }
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatal(err)
	}
	return Event{ID: env.ID, Type: env.Type, AccountID: env.Account, Livemode: true, Object: env.Data.Object, Payload: raw}
}

// Versioning item 4 and the payment references of both API versions.
func TestParseFixtures(t *testing.T) {
	s := &Service{}
	for _, tc := range []struct {
		fixture string
		want    payment
	}{
		{"checkout_session_completed_payment.json", payment{kind: PaymentOneTime, programID: 1, clickID: "cust_1_1", customerKey: "user_1",
			email: "buyer@example.com", processorCustomerID: "cus_Pbuyer1", transactionID: "pi_3Qpayment1", amountCents: 2500, currency: "usd",
			refs: []PaymentRef{{"pi_3Qpayment1", RefPaymentIntent}, {"cs_live_a1payment", RefCheckoutSession}}}},
		{"checkout_session_completed_subscription.json", payment{skip: OutcomeSubscriptionSkip, programID: 1, clickID: "cust_1_1"}},
		{"invoice_payment_succeeded_basil.json", payment{kind: PaymentSubscriptionFirst, programID: 1, clickID: "cust_1_1",
			email: "subscriber@example.com", processorCustomerID: "cus_Psub1", transactionID: "in_1Qbasil", amountCents: 1900, currency: "eur",
			refs: []PaymentRef{{"in_1Qbasil", RefInvoice}, {"pi_3Qbasil1", RefPaymentIntent}}}},
		{"invoice_payment_succeeded_legacy.json", payment{kind: PaymentSubscriptionRenewal, programID: 1, clickID: "cust_1_1",
			email: "subscriber@example.com", processorCustomerID: "cus_Psub1", transactionID: "in_1Qlegacy", amountCents: 1900, currency: "eur",
			refs: []PaymentRef{{"in_1Qlegacy", RefInvoice}, {"pi_3Qlegacy1", RefPaymentIntent}, {"ch_3Qlegacy1", RefCharge}}}},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			p, err := s.parse(eventOf(t, tc.fixture))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*p, tc.want) {
				t.Fatalf("got %+v\nwant %+v", *p, tc.want)
			}
		})
	}
	t.Run("a refund event is not a payment", func(t *testing.T) {
		if p, err := s.parse(eventOf(t, "charge_refunded.json")); p != nil || err != nil {
			t.Fatalf("%+v %v", p, err)
		}
	})
	t.Run("the new invoice path wins over the old one", func(t *testing.T) {
		ev := eventOf(t, "invoice_payment_succeeded_basil.json")
		var obj map[string]any
		_ = json.Unmarshal(ev.Object, &obj)
		obj["subscription_details"] = map[string]any{"metadata": map[string]any{"svc_click_id": "cust_old"}}
		ev.Object, _ = json.Marshal(obj)
		if p, err := s.parse(ev); err != nil || p.clickID != "cust_1_1" {
			t.Fatalf("%+v %v", p, err)
		}
	})
	t.Run("a payment without an id is refused", func(t *testing.T) {
		ev := eventOf(t, "checkout_session_completed_payment.json")
		var obj map[string]any
		_ = json.Unmarshal(ev.Object, &obj)
		obj["id"], obj["payment_intent"] = " ", nil
		ev.Object, _ = json.Marshal(obj)
		if _, err := s.parse(ev); err == nil {
			t.Fatal("no error")
		}
	})
}
