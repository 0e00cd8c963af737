package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	cataloghttp "github.com/svc-dev/svc/services/accounts/internal/catalog/httpapi"
	"github.com/svc-dev/svc/services/accounts/internal/programs"
	"github.com/svc-dev/svc/services/accounts/internal/programs/endpoints"
	settingshttpapi "github.com/svc-dev/svc/services/accounts/internal/settings/httpapi"
)

const msgOrigins = "allowed_origins must be a list of origins like https://shop.example.com"

// decodeCreate reads the command-line init's fields exactly as init reads
// them (name and domain that are not strings count as missing; a
// commission_type that is not a string is named as sent; numbers are raw
// JSON for the catalog's own messages), plus allowed_origins as the
// settings routes read it and hold_days (the admin API's field: a brand
// chooses how long commissions wait before approval, 30 days when left
// out). Unknown fields are ignored, as init ignores them.
func decodeCreate(ctx context.Context, r *http.Request) (any, error) {
	req := endpoints.CreateRequest{UserID: settingshttpapi.SessionUser(ctx)}
	obj, err := httpkit.DecodeObject(r, 0)
	if err != nil {
		return nil, numberNUL(err)
	}
	advertiser, program := cataloghttp.ReadProgram(obj)
	if v, ok := obj.Raw("hold_days"); ok {
		raw := string(v)
		program.HoldDays = &raw
	}
	in := programs.CreateInput{AdvertiserID: advertiser, Program: program}
	if obj.Has("allowed_origins") {
		// null is no origins, as an empty list is.
		v, ok, err := obj.StringSlice("allowed_origins")
		if err != nil {
			return nil, &catalog.FieldError{Field: "allowed_origins", Message: msgOrigins}
		}
		if !ok {
			v = []string{}
		}
		in.Program.AllowedOrigins, in.Program.AllowedOriginsSet = v, true
	}
	req.Input = in
	return req, nil
}

// numberNUL gives a NUL refusal of a number field init's message for it (a
// string holding U+0000 is no number); other fields keep the generic
// "<field> must not contain the NUL character".
func numberNUL(err error) error {
	var de *httpkit.DecodeError
	if !errors.As(err, &de) {
		return err
	}
	msg, ok := map[string]string{
		"commission_rate": catalog.MsgCommissionRate,
		"duration_months": catalog.MsgDurationMonths,
		"cookie_duration": catalog.MsgCookieDuration,
	}[de.Field]
	if !ok {
		return err
	}
	return &catalog.FieldError{Field: de.Field, Message: msg}
}

// decodeList reads ?limit (1 to 100, 50 when absent) and ?cursor (a
// previous page's next_cursor).
func decodeList(ctx context.Context, r *http.Request) (any, error) {
	req := endpoints.ListRequest{UserID: settingshttpapi.SessionUser(ctx), Page: programs.Page{Limit: programs.DefaultLimit}}
	q := r.URL.Query()
	if v, ok := q["limit"]; ok {
		n, err := strconv.Atoi(v[0])
		if err != nil || len(v) > 1 || n < 1 || n > programs.MaxLimit {
			req.PageErr = programs.ErrBadLimit
			return req, nil
		}
		req.Page.Limit = n
	}
	if v, ok := q["cursor"]; ok {
		n, err := strconv.ParseInt(v[0], 10, 64)
		if err != nil || len(v) > 1 || n <= 0 {
			req.PageErr = programs.ErrBadCursor
			return req, nil
		}
		req.Page.After = n
	}
	return req, nil
}
