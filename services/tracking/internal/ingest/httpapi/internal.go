package httpapi

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/tracking/internal/ingest"
)

// AttributionsPath is the commissions service's route for attribution
// decisions: internal, on tracking's own port, never on the Ingress or the
// local gateway.
const AttributionsPath = "/internal/v1/attributions"

// The internal route's messages.
const (
	msgTransactionID     = "transaction_id is required and must be a string"
	msgTransactionIDLong = "transaction_id must be at most 255 characters"
	msgAmountCents       = "amount_cents is required and must be a positive integer"
	msgAmountSettleOnly  = "amount_cents may be 0 only with settle_lead: true (a payment of nothing only settles a provisional lead)"

	msgAttrProgramID  = "program_id is required and must be a positive integer"
	msgAttrCurrency   = "currency is required: one of USD, EUR, VND"
	msgAttrOccurredAt = "occurred_at is required and must be an RFC 3339 time after 1970 and not in the future"
	msgAttrSettleLead = "settle_lead must be a boolean"
	msgAttrSource     = `source is required and must be "api" or "processor"`
	msgAttrEmailHash  = "email_hash must be the lower-case hex SHA-256 of the trimmed, lower-cased email address"
)

// maxFutureSkew is how far ahead of tracking's clock a payment's
// occurred_at may be (the callers' clocks drift a little).
const maxFutureSkew = 5 * time.Minute

var emailHashShape = regexp.MustCompile(`^[0-9a-f]{64}$`)

// attributionErrors: the internal route's codes (the caller branches on
// them, never on messages).
var attributionErrors = routeErrors{failMsg: "Attribution failed", codes: []kindCode{
	{errkind.NotFound, "customer_not_found"},
	{errkind.Unauthenticated, "unauthorized"},
	{errkind.Unavailable, "not_configured"},
}}

// attributionMessages are the route's field messages a NUL takes: each
// holds for any unusable value of its field.
var attributionMessages = map[string]string{
	"transaction_id": msgTransactionID,
	"program_id":     msgAttrProgramID,
	"amount_cents":   msgAmountCents,
	"occurred_at":    msgAttrOccurredAt,
	"currency":       msgAttrCurrency,
	"source":         msgAttrSource,
	"settle_lead":    msgAttrSettleLead,
	"email_hash":     msgAttrEmailHash,
}

// decodeAttribution reads an attribution request field by field, in the
// order of the README's table. occurred_at becomes the customer's first
// purchase date: a future one (beyond maxFutureSkew) or one before 1970 is
// refused.
func decodeAttribution(now func() time.Time) func(context.Context, *http.Request) (any, error) {
	return func(_ context.Context, r *http.Request) (any, error) {
		return readAttribution(r, now().UTC())
	}
}

func readAttribution(r *http.Request, now time.Time) (any, error) {
	obj, err := httpkit.DecodeObject(r, 0)
	if err != nil {
		return nil, specMessages(err, attributionMessages)
	}
	var in ingest.AttributionInput
	id, ok, err := obj.Int("program_id")
	if err != nil || !ok || id <= 0 {
		return nil, invalid(msgAttrProgramID)
	}
	in.ProgramID = id
	txn, ok, err := obj.String("transaction_id")
	switch {
	case err != nil || !ok || strings.TrimSpace(txn) == "":
		return nil, invalid(msgTransactionID)
	case utf8.RuneCountInString(txn) > maxTextLength:
		return nil, invalid(msgTransactionIDLong)
	}
	in.TransactionID = txn
	f := &fields{obj: obj}
	in.ClickID = f.text("click_id", maxTextLength)
	in.CustomerKey = f.text("customer_key", maxTextLength)
	in.ProcessorCustomerID = f.text("processor_customer_id", maxTextLength)
	in.ClientReferenceID = f.text("client_reference_id", maxTextLength)
	if f.err != nil {
		return nil, f.err
	}
	if obj.Has("email_hash") && !obj.IsNull("email_hash") {
		v, _, err := obj.String("email_hash")
		if err != nil || !emailHashShape.MatchString(v) {
			return nil, invalid(msgAttrEmailHash)
		}
		in.EmailHash = v
	}
	amount, ok, err := obj.Int("amount_cents")
	if err != nil || !ok || amount < 0 {
		return nil, invalid(msgAmountCents)
	}
	in.AmountCents = amount
	code, ok, err := obj.String("currency")
	if err != nil || !ok || !ingest.SupportedCurrency(strings.ToUpper(code)) {
		return nil, invalid(msgAttrCurrency)
	}
	in.Currency = strings.ToUpper(code)
	raw, ok, err := obj.String("occurred_at")
	t, perr := time.Parse(time.RFC3339Nano, raw)
	if err != nil || !ok || perr != nil || t.Before(time.Unix(0, 0)) || t.Sub(now) > maxFutureSkew {
		return nil, invalid(msgAttrOccurredAt)
	}
	in.OccurredAt = t.UTC()
	settle, _, err := obj.Bool("settle_lead")
	if err != nil {
		return nil, invalid(msgAttrSettleLead)
	}
	in.SettleLead = settle
	if in.AmountCents == 0 && !in.SettleLead {
		return nil, invalid(msgAmountSettleOnly)
	}
	source, _, err := obj.String("source")
	if err != nil || (source != ingest.SourceAPI && source != ingest.SourceProcessor) {
		return nil, invalid(msgAttrSource)
	}
	in.Source = source
	return in, nil
}
