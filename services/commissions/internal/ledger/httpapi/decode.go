package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/commissions/internal/ledger/endpoints"
)

// pathID reads a positive integer path value; anything else is a 400
// naming the segment (an id that parses but names nothing is the
// domain's 404).
func pathID(r *http.Request, key string) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue(key), 10, 64)
	if err != nil || id <= 0 {
		return 0, &httpkit.FieldError{Field: key, Want: "a positive integer"}
	}
	return id, nil
}

func decodeID(key string) kithttp.DecodeRequestFunc {
	return func(_ context.Context, r *http.Request) (any, error) {
		id, err := pathID(r, key)
		if err != nil {
			return nil, err
		}
		return endpoints.IDRequest{ID: id}, nil
	}
}

func decodeNothing(context.Context, *http.Request) (any, error) { return struct{}{}, nil }

func decodeRecipient(kind string) kithttp.DecodeRequestFunc {
	return func(_ context.Context, r *http.Request) (any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return nil, err
		}
		return endpoints.NotificationsRequest{RecipientKind: kind, RecipientID: id}, nil
	}
}

// decodeSale reads the transaction id (any text but NUL, which Postgres
// text cannot hold) and ?test=true|false (default false).
func decodeSale(_ context.Context, r *http.Request) (any, error) {
	tid := r.PathValue("transaction_id")
	if strings.ContainsRune(tid, 0) {
		return nil, &httpkit.FieldError{Field: "transaction_id", Msg: httpkit.NULMessage("transaction_id")}
	}
	if strings.TrimSpace(tid) == "" {
		return nil, &httpkit.FieldError{Field: "transaction_id", Want: "a non-empty string"}
	}
	test := false
	if q := r.URL.Query(); q.Has("test") {
		v, err := strconv.ParseBool(q.Get("test"))
		if err != nil {
			return nil, &httpkit.FieldError{Field: "test", Want: "true or false"}
		}
		test = v
	}
	return endpoints.SaleRequest{TransactionID: tid, Test: test}, nil
}

// decodeOpenWithdrawal reads {currency, amount?}: currency is required,
// amount (minor units) when sent must be a positive integer; absent, the
// withdrawal takes all that is available.
func decodeOpenWithdrawal(_ context.Context, r *http.Request) (any, error) {
	id, err := pathID(r, "id")
	if err != nil {
		return nil, err
	}
	obj, err := httpkit.DecodeObject(r, 0)
	if err != nil {
		return nil, err
	}
	cur, ok, err := obj.String("currency")
	if err != nil {
		return nil, err
	}
	if !ok || cur == "" {
		return nil, &httpkit.FieldError{Field: "currency", Msg: "currency is required"}
	}
	req := endpoints.OpenWithdrawalRequest{PartnerID: id, Currency: cur}
	if obj.Has("amount") && !obj.IsNull("amount") {
		amount, _, err := obj.Int("amount")
		if err != nil || amount <= 0 {
			return nil, &httpkit.FieldError{Field: "amount", Want: "a positive integer (minor units)"}
		}
		req.Amount = amount
	}
	return req, nil
}
