package httpapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/svc-dev/svc/libs/auth/session"
	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/commissions/internal/console"
	"github.com/svc-dev/svc/services/commissions/internal/console/endpoints"
)

// maxBody bounds a payout body (a few short fields).
const maxBody = 4 << 10

// maxReference bounds a payout's external reference.
const maxReference = 200

func target(ctx context.Context, r *http.Request) endpoints.Target {
	return endpoints.Target{UserID: session.UserID(ctx), ProgramID: httpkit.PathID(r, "id")}
}

// wantsCSV reports whether the client asked for text/csv (and not JSON
// first): a spreadsheet's export.
func wantsCSV(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch mt {
		case "text/csv":
			return true
		case "application/json", "*/*":
			return false
		}
	}
	return false
}

func limit(q map[string]string) (int, error) {
	v, ok := q["limit"]
	if !ok {
		return console.DefaultLimit, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > console.MaxLimit {
		return 0, console.ErrBadLimit
	}
	return n, nil
}

// parseTime reads a date (midnight UTC) or an RFC 3339 time.
func parseTime(v string) (time.Time, bool) {
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, true
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	return t.UTC(), err == nil
}

func decodeCommissions(ctx context.Context, r *http.Request) (any, error) {
	req := endpoints.CommissionsRequest{Target: target(ctx, r), CSV: wantsCSV(r)}
	q, err := httpkit.Query(r, "status", "partner_id", "from", "to", "cursor", "limit")
	if err != nil {
		req.Err = err
		return req, nil
	}
	req.Err = func() error {
		if v, ok := q["status"]; ok {
			valid := false
			for _, s := range console.Statuses {
				valid = valid || s == v
			}
			if !valid {
				return console.ErrBadStatus
			}
			req.Filter.Status = v
		}
		if v, ok := q["partner_id"]; ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				return console.ErrBadPartner
			}
			req.Filter.PartnerID = n
		}
		var ok bool
		if v, sent := q["from"]; sent {
			if req.Filter.From, ok = parseTime(v); !ok {
				return console.ErrBadFrom
			}
		}
		if v, sent := q["to"]; sent {
			if req.Filter.To, ok = parseTime(v); !ok {
				return console.ErrBadTo
			}
		}
		if !req.Filter.From.IsZero() && !req.Filter.To.IsZero() && !req.Filter.To.After(req.Filter.From) {
			return console.ErrEmptyRange
		}
		if v, sent := q["cursor"]; sent {
			c, ok := decodeCursor(v)
			if !ok {
				return console.ErrBadCursor
			}
			req.After = &c
		}
		var err error
		req.Limit, err = limit(q)
		return err
	}()
	return req, nil
}

func decodePayouts(ctx context.Context, r *http.Request) (any, error) {
	req := endpoints.PayoutsRequest{Target: target(ctx, r), CSV: wantsCSV(r)}
	q, err := httpkit.Query(r, "cursor", "balances_cursor", "limit")
	if err != nil {
		req.Err = err
		return req, nil
	}
	if v, ok := q["cursor"]; ok {
		id, good := decodeIDCursor(v)
		if !good {
			req.Err = console.ErrBadCursor
			return req, nil
		}
		req.AfterID = id
	}
	if v, ok := q["balances_cursor"]; ok {
		c, good := decodeMoneyCursor(v)
		if !good {
			req.Err = console.ErrBadMoneyCursor
			return req, nil
		}
		req.MoneyAfter = c
	}
	req.Limit, req.Err = limit(q)
	return req, nil
}

// body reads a JSON object body; empty is allowed when optional. Bytes
// that are not UTF-8 are refused (the JSON decoder would silently replace
// them), NULs by the Object's readers.
func body(r *http.Request, optional bool, known ...string) (httpkit.Object, error) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return nil, &httpkit.DecodeError{Status: http.StatusBadRequest, Message: "Invalid request body"}
	}
	if len(raw) > maxBody {
		return nil, &httpkit.DecodeError{Status: http.StatusRequestEntityTooLarge, Message: "Request body too large"}
	}
	if optional && len(bytes.TrimSpace(raw)) == 0 {
		return httpkit.Object{}, nil
	}
	if !utf8.Valid(raw) {
		return nil, &console.Error{Kind: errkind.Invalid, Field: "body", Message: "the body is not valid UTF-8"}
	}
	r.Body = io.NopCloser(bytes.NewReader(raw))
	obj, err := httpkit.DecodeObject(r, maxBody)
	if err != nil {
		return nil, err
	}
	if err := httpkit.CheckNUL(raw); err != nil {
		return nil, err
	}
	for _, k := range obj.Keys() {
		ok := false
		for _, n := range known {
			ok = ok || n == k
		}
		if !ok {
			return nil, &console.Error{Kind: errkind.Invalid, Field: k,
				Message: unknownField(k, known)}
		}
	}
	return obj, nil
}

// decodeOpenPayout reads {partner_id, currency, amount?}: amount (minor
// units) when sent is a positive integer; absent or null, the payout takes
// all that is available.
func decodeOpenPayout(ctx context.Context, r *http.Request) (any, error) {
	req := endpoints.OpenPayoutRequest{Target: target(ctx, r)}
	req.Err = func() error {
		obj, err := body(r, false, "partner_id", "currency", "amount")
		if err != nil {
			return err
		}
		id, ok, err := obj.Int("partner_id")
		if err != nil || !ok || id <= 0 {
			return &httpkit.FieldError{Field: "partner_id", Msg: "partner_id is required and must be a positive integer"}
		}
		req.PartnerID = id
		cur, ok, err := obj.String("currency")
		if err != nil {
			return err
		}
		if !ok || cur == "" {
			return &httpkit.FieldError{Field: "currency", Msg: "currency is required"}
		}
		req.Currency = cur
		if obj.Has("amount") && !obj.IsNull("amount") {
			amount, _, err := obj.Int("amount")
			if err != nil || amount <= 0 {
				return &httpkit.FieldError{Field: "amount", Want: "a positive integer (minor units)"}
			}
			req.Amount = amount
		}
		return nil
	}()
	return req, nil
}

// decodePay reads the optional {reference}: the transfer's external
// reference, at most 200 characters.
func decodePay(ctx context.Context, r *http.Request) (any, error) {
	req := endpoints.PayoutRequest{Target: target(ctx, r), PayoutID: httpkit.PathID(r, "payoutId")}
	req.Err = func() error {
		obj, err := body(r, true, "reference")
		if err != nil {
			return err
		}
		ref, _, err := obj.String("reference")
		if err != nil {
			return err
		}
		ref = strings.TrimSpace(ref)
		if utf8.RuneCountInString(ref) > maxReference {
			return &httpkit.FieldError{Field: "reference", Msg: fmt.Sprintf("reference must be at most %d characters", maxReference)}
		}
		req.Reference = ref
		return nil
	}()
	return req, nil
}

// decodeCancel takes no body (an empty JSON object is allowed).
func decodeCancel(ctx context.Context, r *http.Request) (any, error) {
	req := endpoints.PayoutRequest{Target: target(ctx, r), PayoutID: httpkit.PathID(r, "payoutId")}
	_, req.Err = body(r, true)
	return req, nil
}

// Cursors are opaque to clients: base64url of "<created_at unix µs>.<id>"
// for commissions, of "<id>" for payouts.
func encodeCursor(c *console.Cursor) *string {
	if c == nil {
		return nil
	}
	s := base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf("%d.%d", c.CreatedAt.UnixMicro(), c.ID)))
	return &s
}

func decodeCursor(v string) (console.Cursor, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return console.Cursor{}, false
	}
	at, id, ok := strings.Cut(string(raw), ".")
	if !ok {
		return console.Cursor{}, false
	}
	us, err1 := strconv.ParseInt(at, 10, 64)
	n, err2 := strconv.ParseInt(id, 10, 64)
	if err1 != nil || err2 != nil || n <= 0 {
		return console.Cursor{}, false
	}
	return console.Cursor{CreatedAt: time.UnixMicro(us).UTC(), ID: n}, true
}

func encodeID(id int64) *string {
	if id <= 0 {
		return nil
	}
	s := base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(id, 10)))
	return &s
}

// The money cursor is base64url of "<partner id>.<currency>".
func encodeMoneyCursor(c *console.MoneyCursor) *string {
	if c == nil {
		return nil
	}
	s := base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.PartnerID, 10) + "." + c.Currency))
	return &s
}

func decodeMoneyCursor(v string) (console.MoneyCursor, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return console.MoneyCursor{}, false
	}
	id, cur, ok := strings.Cut(string(raw), ".")
	n, err := strconv.ParseInt(id, 10, 64)
	if !ok || err != nil || n <= 0 || len(cur) != 3 {
		return console.MoneyCursor{}, false
	}
	for _, r := range cur {
		if r < 'A' || r > 'Z' {
			return console.MoneyCursor{}, false
		}
	}
	return console.MoneyCursor{PartnerID: n, Currency: cur}, true
}

func decodeIDCursor(v string) (int64, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	return n, err == nil && n > 0
}

// unknownField names a field the route does not take, and what it takes.
func unknownField(k string, known []string) string {
	if len(known) == 0 {
		return fmt.Sprintf("Unknown field: %s. Send no fields", k)
	}
	return fmt.Sprintf("Unknown field: %s. Send %s", k, strings.Join(known, ", "))
}
