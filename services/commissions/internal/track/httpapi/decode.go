package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/svc-dev/svc/libs/auth/apikey"
	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/commissions/internal/money"
	"github.com/svc-dev/svc/services/commissions/internal/track"
)

// The routes' validation messages (the specification's Track sale and
// Track refund tables), and ours where it is silent.
const (
	msgTransactionID     = "transaction_id is required and must be a string"
	msgTransactionIDLong = "transaction_id must be at most 255 characters"
	msgAmountCents       = "amount_cents is required and must be a positive integer"
	msgAmountCentsMax    = "amount_cents must be at most 1000000000000"
	msgOccurredAt        = "occurred_at must be an ISO 8601 time within the last 30 days"
	msgProviderPaymentID = "provider_payment_id must be a string of 1 to 255 characters"
	msgLivemode          = "livemode must be a boolean"
	msgCurrencyRequired  = "currency is required: one of USD, EUR, VND"
	msgCurrencyFmt       = "currency %s is not supported"
	msgSaleTestMode      = "additional_data.test_mode must be a boolean"
	msgAdditionalData    = "additional_data must be an object"

	msgRefundTransactionID = "transaction_id is required"
	msgRefundReason        = "reason must be refund or chargeback"
	msgRefundAmount        = "refund_amount_cents must be a positive integer"
	msgRefundID            = "refund_id must be a string of at most 255 characters"
	msgRefundReasonText    = "refund_reason must be a string of at most 1000 characters"

	maxTextLength = 255
	// maxAmountCents bounds a sale: 10^12 minor units (ten billion
	// dollars or euros, a trillion dong). Far above any real payment, and
	// far enough below int64 that commissions and balances never overflow.
	maxAmountCents  = 1_000_000_000_000
	maxReasonLength = 1000
	maxSaleAge      = 30 * 24 * time.Hour
	maxSaleFuture   = 5 * time.Minute
)

// saleProviders are the payment systems a brand may name in provider: the
// ones the dashboard knows how to link to, plus "manual" and "other".
var saleProviders = []string{"processor", "paddle", "lemonsqueezy", "paypal", "chargebee", "recurly", "braintree", "manual", "other"}

func msgProvider() string { return "provider must be one of: " + strings.Join(saleProviders, ", ") }

// saleMessages are the table's messages a NUL in their field takes: each
// holds for a value containing one. Other fields, currency among them (its
// 422 would echo the value), get the generic NUL message.
func saleMessages() map[string]string {
	return map[string]string{
		"transaction_id":            msgTransactionID,
		"amount_cents":              msgAmountCents,
		"occurred_at":               msgOccurredAt,
		"provider":                  msgProvider(),
		"livemode":                  msgLivemode,
		"additional_data.test_mode": msgSaleTestMode,
	}
}

// refundMessages: as saleMessages, for the refund route. Not
// transaction_id (the table's "transaction_id is required" is for a
// missing one), refund_id or refund_reason (ours name a length): a NUL in
// them gets the generic message, which says what is wrong.
func refundMessages() map[string]string {
	return map[string]string{
		"reason":              msgRefundReason,
		"refund_amount_cents": msgRefundAmount,
	}
}

func invalid(msg string) error { return &track.Error{Kind: errkind.Invalid, Message: msg} }

// specMessages gives a decoding refusal of a field (a NUL, through
// httpkit.CheckNUL) the route's own message for it where there is one.
func specMessages(err error, msgs map[string]string) error {
	var de *httpkit.DecodeError
	if errors.As(err, &de) && de.Field != "" {
		if m, ok := msgs[de.Field]; ok {
			return invalid(m)
		}
	}
	return err
}

// requestKey is the program key the auth middleware let through.
func requestKey(ctx context.Context) (track.Key, error) {
	k, ok := apikey.KeyFrom(ctx)
	if !ok {
		return track.Key{}, fmt.Errorf("no authenticated key in the request: %w", errkind.Internal)
	}
	return track.Key{ID: k.ID, ProgramID: k.ProgramID, Test: k.Test}, nil
}

// optionalText reads an optional string of at most max characters; msg is
// the refusal of any other value.
func optionalText(obj httpkit.Object, key string, max int, msg string) (string, error) {
	if !obj.Has(key) || obj.IsNull(key) {
		return "", nil
	}
	v, _, err := obj.String(key)
	if err != nil || utf8.RuneCountInString(v) > max {
		return "", invalid(msg)
	}
	return v, nil
}

// decodeSale checks the body in the order of the specification's table;
// the currency, answered with 422, comes last.
func decodeSale(now func() time.Time) func(context.Context, *http.Request) (any, error) {
	return func(ctx context.Context, r *http.Request) (any, error) {
		key, err := requestKey(ctx)
		if err != nil {
			return nil, err
		}
		obj, err := httpkit.DecodeObject(r, 0)
		if err != nil {
			return nil, specMessages(err, saleMessages())
		}
		at := now().UTC()
		in := track.SaleInput{Key: key, OccurredAt: at}
		if ad, ok, err := obj.Object("additional_data"); err != nil {
			return nil, invalid(msgAdditionalData)
		} else if ok {
			v, _, err := ad.Bool("test_mode")
			if err != nil {
				return nil, invalid(msgSaleTestMode)
			}
			in.TestMode = v
		}
		// A test key's sales are test sales too, so they get an id the same way.
		testSale := in.TestMode || key.Test
		txn, ok, err := obj.String("transaction_id")
		switch {
		case err != nil || (ok && strings.TrimSpace(txn) == ""):
			return nil, invalid(msgTransactionID)
		case !ok && !testSale:
			return nil, invalid(msgTransactionID)
		case utf8.RuneCountInString(txn) > maxTextLength:
			return nil, invalid(msgTransactionIDLong)
		}
		in.TransactionID = txn // "" for a test sale: the service generates one
		amount, ok, err := obj.Int("amount_cents")
		if err != nil || !ok || amount <= 0 {
			return nil, invalid(msgAmountCents)
		}
		if amount > maxAmountCents {
			return nil, invalid(msgAmountCentsMax)
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
		for _, f := range []struct {
			key  string
			into *string
		}{{"click_id", &in.ClickID}, {"customer_key", &in.CustomerKey}} {
			v, err := optionalText(obj, f.key, maxTextLength, fmt.Sprintf("%s must be a string of at most %d characters", f.key, maxTextLength))
			if err != nil {
				return nil, err
			}
			*f.into = v
		}
		raw, ok := obj.Raw("currency")
		if !ok || obj.IsNull("currency") {
			return nil, invalid(msgCurrencyRequired)
		}
		code, _, err := obj.String("currency")
		if err != nil {
			return nil, unsupportedCurrency(string(raw))
		}
		cur, err := money.ParseCurrency(strings.ToUpper(code))
		if err != nil {
			return nil, unsupportedCurrency(code)
		}
		in.Currency = string(cur)
		return in, nil
	}
}

func unsupportedCurrency(code string) error {
	return &track.Error{Kind: errkind.Unprocessable, Message: fmt.Sprintf(msgCurrencyFmt, code)}
}

// decodeRefund checks the refund body in the order of the specification's
// table. The test key never gets here (testKeyRefund answers it first).
func decodeRefund(ctx context.Context, r *http.Request) (any, error) {
	key, err := requestKey(ctx)
	if err != nil {
		return nil, err
	}
	obj, err := httpkit.DecodeObject(r, 0)
	if err != nil {
		return nil, specMessages(err, refundMessages())
	}
	in := track.RefundInput{Key: key}
	txn, ok, err := obj.String("transaction_id")
	switch {
	case err != nil || !ok || strings.TrimSpace(txn) == "":
		return nil, invalid(msgRefundTransactionID)
	case utf8.RuneCountInString(txn) > maxTextLength:
		return nil, invalid(msgTransactionIDLong)
	}
	in.TransactionID = txn
	reason, err := optionalText(obj, "reason", maxTextLength, msgRefundReason)
	if err != nil {
		return nil, err
	}
	if reason != "" && reason != "refund" && reason != "chargeback" {
		return nil, invalid(msgRefundReason)
	}
	if obj.Has("refund_amount_cents") && !obj.IsNull("refund_amount_cents") {
		amount, _, err := obj.Int("refund_amount_cents")
		if err != nil || amount < 0 {
			return nil, invalid(msgRefundAmount)
		}
		in.AmountCents = amount
	}
	if in.RefundID, err = optionalText(obj, "refund_id", maxTextLength, msgRefundID); err != nil {
		return nil, err
	}
	text, err := optionalText(obj, "refund_reason", maxReasonLength, msgRefundReasonText)
	if err != nil {
		return nil, err
	}
	in.Reason = strings.TrimSpace(text)
	if in.Reason == "" {
		in.Reason = reason
	}
	return in, nil
}
