package httpapi

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/tracking/internal/ingest"
)

// ProcessorWebhookPath receives the connected payment processor's events
// (the platform's own endpoint: brands add no webhook).
const ProcessorWebhookPath = "/api/v1/webhooks/processor"

// SignatureHeader carries "t=<unix seconds>,v1=<hex HMAC-SHA256 of
// "<t>.<body>">" under the webhook secret, the processor's scheme.
const SignatureHeader = "Processor-Signature"

const (
	maxWebhookBody     = 1 << 20
	signatureTolerance = 5 * time.Minute

	msgSignatureMissing = "Missing " + SignatureHeader + " header"
	msgSignatureInvalid = "Invalid " + SignatureHeader + ": the signature does not match the body, or its timestamp is more than 5 minutes away"
	msgEventPrefix      = "Invalid processor event: "
	msgEventInvalid     = msgEventPrefix + "expected a JSON object with id, type and data.object"

	// Bounds of a number in a stored event: well inside Postgres numeric
	// (131072 digits before the point, 16383 after), far beyond any real
	// amount or timestamp.
	maxNumberLength   = 400
	maxNumberExponent = 1000
)

// Sign returns the signature header value for body at t: what the
// processor sends, and what tests and the local stack use to play it.
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts))
	m.Write([]byte("."))
	m.Write(body)
	return m.Sum(nil)
}

// verifySignature accepts any v1 entry that matches (the processor sends
// several while its secret is being rolled).
func verifySignature(secret, header string, body []byte, now time.Time) bool {
	var ts string
	var sigs [][]byte
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			if b, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, b)
			}
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return false
	}
	if d := now.Sub(time.Unix(sec, 0)); d > signatureTolerance || d < -signatureTolerance {
		return false
	}
	want := mac(secret, ts, body)
	for _, s := range sigs {
		if hmac.Equal(s, want) {
			return true
		}
	}
	return false
}

type processorEvent struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Account  string `json:"account"`
	Created  int64  `json:"created"`
	Livemode *bool  `json:"livemode"`
	Data     struct {
		Object json.RawMessage `json:"object"`
	} `json:"data"`
}

// metadata holds string values; the processor sends only strings, but a
// number is read rather than failing the delivery.
type metadata map[string]any

func (m metadata) get(k string) string {
	switch v := m[k].(type) {
	case string:
		return strings.TrimSpace(v)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return ""
}

type checkoutSession struct {
	ID                string   `json:"id"`
	Mode              string   `json:"mode"`
	PaymentStatus     string   `json:"payment_status"`
	AmountTotal       int64    `json:"amount_total"`
	Currency          string   `json:"currency"`
	Customer          string   `json:"customer"`
	CustomerEmail     string   `json:"customer_email"`
	ClientReferenceID string   `json:"client_reference_id"`
	PaymentIntent     string   `json:"payment_intent"`
	Metadata          metadata `json:"metadata"`
	CustomerDetails   *struct {
		Email string `json:"email"`
	} `json:"customer_details"`
}

type subscriptionDetails struct {
	Metadata metadata `json:"metadata"`
}

type invoice struct {
	ID            string `json:"id"`
	Customer      string `json:"customer"`
	CustomerEmail string `json:"customer_email"`
	AmountPaid    int64  `json:"amount_paid"`
	Currency      string `json:"currency"`
	BillingReason string `json:"billing_reason"`
	// API versions from 2025-03-31 put the subscription under parent;
	// earlier ones at the top level. The new path is read first.
	Parent *struct {
		SubscriptionDetails *subscriptionDetails `json:"subscription_details"`
	} `json:"parent"`
	SubscriptionDetails *subscriptionDetails `json:"subscription_details"`
}

func (inv invoice) metadata() metadata {
	if inv.Parent != nil && inv.Parent.SubscriptionDetails != nil && len(inv.Parent.SubscriptionDetails.Metadata) > 0 {
		return inv.Parent.SubscriptionDetails.Metadata
	}
	if inv.SubscriptionDetails != nil {
		return inv.SubscriptionDetails.Metadata
	}
	return nil
}

func readWebhookBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxWebhookBody+1))
	if err != nil {
		return nil, invalid(msgEventInvalid)
	}
	if len(body) > maxWebhookBody {
		return nil, &httpkit.DecodeError{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("Request body must not exceed %d bytes", maxWebhookBody)}
	}
	return body, nil
}

func decodeProcessorEvent(secret string, now func() time.Time) func(context.Context, *http.Request) (any, error) {
	return func(_ context.Context, r *http.Request) (any, error) {
		body, err := readWebhookBody(r)
		if err != nil {
			return nil, err
		}
		sig := r.Header.Get(SignatureHeader)
		if sig == "" {
			return nil, invalid(msgSignatureMissing)
		}
		if !verifySignature(secret, sig, body, now()) {
			return nil, invalid(msgSignatureInvalid)
		}
		var ev processorEvent
		if err := json.Unmarshal(body, &ev); err != nil || ev.ID == "" || ev.Type == "" || len(ev.Data.Object) == 0 || len(ev.ID) > maxTextLength {
			return nil, invalid(msgEventInvalid)
		}
		// The raw event is stored as jsonb, which refuses what encoding/json
		// lets through; refused here, nothing is stored (see unstorable).
		var nul *httpkit.DecodeError
		if errors.As(httpkit.CheckNUL(body), &nul) {
			return nil, invalid(msgEventPrefix + nul.Message)
		}
		if msg := unstorable(body); msg != "" {
			return nil, invalid(msgEventPrefix + msg)
		}
		at := now().UTC()
		if ev.Created > 0 {
			at = time.Unix(ev.Created, 0).UTC()
		}
		in := ingest.PaymentInput{
			Event:      ingest.ProcessorEvent{ID: ev.ID, Type: ev.Type, AccountID: ev.Account, Payload: body},
			OccurredAt: at, Livemode: ev.Livemode, Skip: ingest.OutcomeStoredOnly,
		}
		if err := paymentOf(&ev, &in); err != nil {
			return nil, err
		}
		if in.Act && ev.Livemode != nil && !*ev.Livemode {
			// A payment in the processor's test mode (the brand trying its
			// checkout) must not convert customers or pay partners.
			in.Act, in.Skip = false, ingest.OutcomeTestModeEvent
		}
		return in, nil
	}
}

// paymentOf reads the payment out of the events acted on here. Refund
// events are stored for the commissions service's reversal; other types
// are stored and acknowledged.
func paymentOf(ev *processorEvent, in *ingest.PaymentInput) error {
	var md metadata
	switch ev.Type {
	case "checkout.session.completed":
		var s checkoutSession
		if err := json.Unmarshal(ev.Data.Object, &s); err != nil {
			return invalid(msgEventInvalid)
		}
		if s.Mode == "subscription" {
			// The invoice event records the subscription's payments.
			in.Skip = ingest.OutcomeSubscriptionSkip
			return nil
		}
		if s.Mode != "payment" || (s.PaymentStatus != "paid" && s.PaymentStatus != "no_payment_required") {
			return nil
		}
		in.Act, md = true, s.Metadata
		in.ClientReferenceID = strings.TrimSpace(s.ClientReferenceID)
		in.Email = s.CustomerEmail
		if s.CustomerDetails != nil && s.CustomerDetails.Email != "" {
			in.Email = s.CustomerDetails.Email
		}
		in.ProcessorCustomerID, in.Currency, in.Kind = s.Customer, s.Currency, ingest.PaymentOneTime
		in.TransactionID = s.PaymentIntent
		if in.TransactionID == "" {
			in.TransactionID = s.ID
		}
		if s.PaymentStatus == "paid" {
			in.AmountCents = s.AmountTotal
		}
	case "invoice.payment_succeeded":
		var inv invoice
		if err := json.Unmarshal(ev.Data.Object, &inv); err != nil {
			return invalid(msgEventInvalid)
		}
		in.Act, md = true, inv.metadata()
		in.Email, in.ProcessorCustomerID, in.Currency = inv.CustomerEmail, inv.Customer, inv.Currency
		in.TransactionID, in.AmountCents = inv.ID, inv.AmountPaid
		in.Kind = ingest.PaymentSubscriptionRenewal
		if inv.BillingReason == "subscription_create" {
			in.Kind = ingest.PaymentSubscriptionFirst
		}
		if in.TransactionID == "" {
			return invalid(msgEventInvalid)
		}
	default:
		return nil
	}
	in.ClickID, in.CustomerKey = md.get("svc_click_id"), md.get("svc_customer_key")
	if id, err := strconv.ParseInt(md.get("program_id"), 10, 64); err == nil && id > 0 {
		in.ProgramID = id
	}
	for _, s := range []string{in.ClickID, in.CustomerKey, in.ClientReferenceID, in.Email, in.ProcessorCustomerID, in.TransactionID} {
		if len(s) > maxTextLength {
			return invalid(fmt.Sprintf("Invalid processor event: identifiers are at most %d characters", maxTextLength))
		}
	}
	if in.AmountCents < 0 {
		in.AmountCents = 0
	}
	return nil
}

// unstorable says why the JSON text body, which encoding/json accepted,
// cannot be stored as jsonb, or "" when it can: invalid UTF-8 (encoding/json
// replaces it only in what it decodes, not in the raw text), a \u escape of
// an unpaired UTF-16 surrogate, or a number beyond numeric's range
// ("1e999999"). U+0000, the other value jsonb refuses, is httpkit.CheckNUL's.
// Each would otherwise fail the insert, a 500 the processor retries for days.
func unstorable(body []byte) string {
	if !utf8.Valid(body) {
		return "the body is not valid UTF-8"
	}
	inString := false
	for i := 0; i < len(body); i++ {
		c := body[i]
		if inString {
			switch {
			case c == '"':
				inString = false
			case c == '\\' && i+5 < len(body) && body[i+1] == 'u':
				r := hexRune(body[i+2 : i+6])
				switch {
				case r >= 0xD800 && r <= 0xDBFF:
					if i+11 >= len(body) || body[i+6] != '\\' || body[i+7] != 'u' {
						return msgSurrogate
					}
					if lo := hexRune(body[i+8 : i+12]); lo < 0xDC00 || lo > 0xDFFF {
						return msgSurrogate
					}
					i += 11
				case r >= 0xDC00 && r <= 0xDFFF:
					return msgSurrogate
				default:
					i += 5
				}
			case c == '\\':
				i++ // a one-character escape, \" and \\ included
			}
			continue
		}
		switch {
		case c == '"':
			inString = true
		case c == '-' || (c >= '0' && c <= '9'):
			j := i
			for j < len(body) && strings.IndexByte("+-.eE0123456789", body[j]) >= 0 {
				j++
			}
			if !numberFits(string(body[i:j])) {
				return fmt.Sprintf("numbers must be at most %d characters with an exponent of at most %d", maxNumberLength, maxNumberExponent)
			}
			i = j - 1
		}
	}
	return ""
}

const msgSurrogate = "a \\u escape names an unpaired UTF-16 surrogate"

func hexRune(b []byte) rune {
	n, err := strconv.ParseUint(string(b), 16, 32)
	if err != nil {
		return -1
	}
	return rune(n)
}

func numberFits(lit string) bool {
	if len(lit) > maxNumberLength {
		return false
	}
	k := strings.IndexAny(lit, "eE")
	if k < 0 {
		return true
	}
	exp, err := strconv.Atoi(lit[k+1:])
	return err == nil && exp >= -maxNumberExponent && exp <= maxNumberExponent
}
