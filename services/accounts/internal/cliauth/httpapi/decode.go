package httpapi

import (
	"context"
	"errors"
	"mime"
	"net/http"
	"strconv"

	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/accounts/internal/catalog"
	cataloghttp "github.com/svc-dev/svc/services/accounts/internal/catalog/httpapi"
	"github.com/svc-dev/svc/services/accounts/internal/cliauth"
	"github.com/svc-dev/svc/services/accounts/internal/cliauth/endpoints"
)

func decodeNothing(context.Context, *http.Request) (any, error) { return struct{}{}, nil }

const formBodyLimit = httpkit.DefaultBodyLimit

// formOrJSON reads a body that is JSON or a plain HTML form post (a
// sign-in page may submit either) and returns the named fields; a JSON
// value that is not a string counts as missing.
func formOrJSON(r *http.Request, names ...string) ([]string, error) {
	out := make([]string, len(names))
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "application/x-www-form-urlencoded" {
		r.Body = http.MaxBytesReader(nil, r.Body, formBodyLimit)
		if err := r.ParseForm(); err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				return nil, &httpkit.DecodeError{Status: http.StatusRequestEntityTooLarge, Message: "Request body must not exceed " + itoa(formBodyLimit) + " bytes", Err: err}
			}
			return nil, &httpkit.DecodeError{Status: http.StatusBadRequest, Message: "Request body is not a valid form", Err: err}
		}
		if err := httpkit.CheckValuesNUL(r.PostForm); err != nil {
			return nil, err
		}
		for i, n := range names {
			out[i] = r.PostForm.Get(n)
		}
		return out, nil
	}
	obj, err := httpkit.DecodeObject(r, 0)
	if err != nil {
		return nil, err
	}
	for i, n := range names {
		out[i], _, _ = obj.String(n)
	}
	return out, nil
}

// decodeCallback reads {state, id_token}.
func decodeCallback(_ context.Context, r *http.Request) (any, error) {
	v, err := formOrJSON(r, "state", "id_token")
	if err != nil {
		return nil, err
	}
	return endpoints.CallbackRequest{State: v[0], IDToken: v[1]}, nil
}

func decodePoll(_ context.Context, r *http.Request) (any, error) {
	return endpoints.PollRequest{State: r.URL.Query().Get("state")}, nil
}

func decodeInit(ctx context.Context, r *http.Request) (any, error) {
	user, err := userFrom(ctx)
	if err != nil {
		return nil, err
	}
	obj, err := httpkit.DecodeObject(r, 0)
	if err != nil {
		return nil, initNUL(err)
	}
	advertiser, program := cataloghttp.ReadProgram(obj)
	in := cliauth.InitInput{AdvertiserID: advertiser, Program: program}
	return endpoints.InitRequest{User: user, Input: in}, nil
}

// initNUL gives a NUL refusal of a number field the contract's message for
// it (a string holding U+0000 is no number); other fields keep the generic
// "<field> must not contain the NUL character" (commission_type's message
// would echo the value).
func initNUL(err error) error {
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

func decodePrograms(ctx context.Context, _ *http.Request) (any, error) {
	user, err := userFrom(ctx)
	if err != nil {
		return nil, err
	}
	return endpoints.ProgramsRequest{User: user}, nil
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
