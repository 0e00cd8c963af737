package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/tracking/internal/ingest"
)

// The sale route's validation messages (the specification's Track sale
// table), and ours where it is silent.
const (
	msgTransactionID     = "transaction_id is required and must be a string"
	msgTransactionIDLong = "transaction_id must be at most 255 characters"
	msgAmountCents       = "amount_cents is required and must be a positive integer"
	msgOccurredAt        = "occurred_at must be an ISO 8601 time within the last 30 days"
	msgProviderPaymentID = "provider_payment_id must be a string of 1 to 255 characters"
	msgLivemode          = "livemode must be a boolean"
	msgCurrencyRequired  = "currency is required: one of USD, EUR, VND"
	msgCurrencyFmt       = "currency %s is not supported"
	msgSaleTestMode      = "additional_data.test_mode must be a boolean"

	maxSaleAge    = 30 * 24 * time.Hour
	maxSaleFuture = 5 * time.Minute
)

// saleMessages are the table's messages a NUL in their field takes: each
// holds for a value containing one (not a usable transaction id, not an
// integer, time, provider or boolean). Other fields, currency among them
// (its 422 would echo the value), get the generic NUL message.
var saleMessages = map[string]string{
	"transaction_id":            msgTransactionID,
	"amount_cents":              msgAmountCents,
	"occurred_at":               msgOccurredAt,
	"provider":                  msgProvider(),
	"livemode":                  msgLivemode,
	"additional_data.test_mode": msgSaleTestMode,
}

// saleProviders are the payment systems a brand may name in provider: the
// ones the dashboard knows how to link to, plus "manual" and "other".
var saleProviders = []string{"processor", "paddle", "lemonsqueezy", "paypal", "chargebee", "recurly", "braintree", "manual", "other"}

func msgProvider() string { return "provider must be one of: " + strings.Join(saleProviders, ", ") }

func unsupportedCurrency(code string) error {
	return &ingest.Error{Kind: ingest.ErrUnsupported, Message: fmt.Sprintf(msgCurrencyFmt, code)}
}

// decodeSale checks the body in the order of the specification's table;
// the currency, answered with 422, comes last.
func decodeSale(now func() time.Time) func(context.Context, *http.Request) (any, error) {
	return func(ctx context.Context, r *http.Request) (any, error) {
		obj, err := httpkit.DecodeObject(r, 0)
		if err != nil {
			return nil, specMessages(err, saleMessages)
		}
		at := now().UTC()
		in := ingest.SaleInput{Key: requestKey(ctx, at), OccurredAt: at}
		if ad, ok, err := obj.Object("additional_data"); err != nil {
			return nil, invalid("additional_data must be an object")
		} else if ok {
			v, _, err := ad.Bool("test_mode")
			if err != nil {
				return nil, invalid(msgSaleTestMode)
			}
			in.TestMode = v
		}
		// A test key's sales are test sales too, so they get an id the same way.
		testSale := in.TestMode || (in.Key != nil && in.Key.Test)
		txn, ok, err := obj.String("transaction_id")
		switch {
		case err != nil || (ok && strings.TrimSpace(txn) == ""):
			return nil, invalid(msgTransactionID)
		case !ok && testSale:
			txn = "test_txn_" + strconv.FormatInt(at.UnixNano(), 10)
		case !ok:
			return nil, invalid(msgTransactionID)
		case utf8.RuneCountInString(txn) > maxTextLength:
			return nil, invalid(msgTransactionIDLong)
		}
		in.TransactionID = txn
		amount, ok, err := obj.Int("amount_cents")
		if err != nil || !ok || amount <= 0 {
			return nil, invalid(msgAmountCents)
		}
		in.AmountCents = amount
		if obj.Has("occurred_at") {
			raw, _, err := obj.String("occurred_at")
			t, perr := time.Parse(time.RFC3339Nano, raw)
			if err != nil || perr != nil || at.Sub(t) > maxSaleAge || t.Sub(at) > maxSaleFuture {
				return nil, invalid(msgOccurredAt)
			}
			in.OccurredAt = t.UTC()
		}
		if obj.Has("provider") {
			p, _, err := obj.String("provider")
			if err != nil || !slices.Contains(saleProviders, p) {
				return nil, invalid(msgProvider())
			}
			in.Provider = p
		}
		if obj.Has("provider_payment_id") {
			p, _, err := obj.String("provider_payment_id")
			if err != nil || p == "" || utf8.RuneCountInString(p) > maxTextLength {
				return nil, invalid(msgProviderPaymentID)
			}
			in.ProviderPaymentID = p
		}
		if obj.Has("livemode") {
			v, _, err := obj.Bool("livemode")
			if err != nil {
				return nil, invalid(msgLivemode)
			}
			in.Livemode = &v
		}
		f := &fields{obj: obj}
		in.ClickID = f.text("click_id", maxTextLength)
		in.CustomerKey = f.text("customer_key", maxTextLength)
		if f.err != nil {
			return nil, f.err
		}
		raw, ok := obj.Raw("currency")
		if !ok || obj.IsNull("currency") {
			return nil, invalid(msgCurrencyRequired)
		}
		code, _, err := obj.String("currency")
		if err != nil {
			return nil, unsupportedCurrency(string(raw))
		}
		if !ingest.SupportedCurrency(strings.ToUpper(code)) {
			return nil, unsupportedCurrency(code)
		}
		in.Currency = strings.ToUpper(code)
		return in, nil
	}
}
