package httpkit

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// PathID reads the path value name as a positive whole number in plain
// digits; anything else ("", "0", "-1", "+1", "1e3", past int64) is 0,
// which names no row: the route's access check or lookup refuses it.
func PathID(r *http.Request, name string) int64 {
	v := r.PathValue(name)
	if v == "" || v[0] == '+' {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

// Query reads the known query parameters, each at most once, into a map.
// A NUL anywhere, a parameter the route does not take or one sent twice
// is a *FieldError naming it (details.field in the services' envelopes).
func Query(r *http.Request, known ...string) (map[string]string, error) {
	q := r.URL.Query()
	if err := CheckValuesNUL(q); err != nil {
		return nil, err
	}
	out := make(map[string]string, len(q))
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	// The first offender in name order: the same answer every time.
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(known, k) {
			return nil, &FieldError{Field: k, Msg: UnknownMessage("parameter", k, known)}
		}
		if len(q[k]) > 1 {
			return nil, &FieldError{Field: k, Msg: k + " must be sent once"}
		}
		out[k] = q[k][0]
	}
	return out, nil
}

// UnknownMessage names a field or parameter (what) the route does not
// take, and those it takes. A name that is not UTF-8 or is long is quoted,
// so the message stays readable and bounded.
func UnknownMessage(what, name string, known []string) string {
	if !utf8.ValidString(name) || len(name) > 100 {
		name = strconv.Quote(name)
	}
	if len(known) == 0 {
		return fmt.Sprintf("Unknown %s: %s. Send none", what, name)
	}
	return fmt.Sprintf("Unknown %s: %s. Send %s", what, name, strings.Join(known, ", "))
}

// DecodeKnownObject reads a JSON object body of at most limit bytes that
// may carry only the known fields (an empty body is the empty object when
// optional, 400 "Request body is required" otherwise). Bytes that are not
// UTF-8 are refused (the JSON decoder would silently replace them), as is
// a NUL anywhere (DecodeObject) and any other field, named in a
// *FieldError.
func DecodeKnownObject(r *http.Request, limit int64, optional bool, known ...string) (Object, error) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, &DecodeError{Status: http.StatusBadRequest, Message: "Request body could not be read"}
	}
	if int64(len(raw)) > limit {
		return nil, &DecodeError{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("Request body must not exceed %d bytes", limit)}
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		if optional {
			return Object{}, nil
		}
		return nil, &DecodeError{Status: http.StatusBadRequest, Message: "Request body is required"}
	}
	if !utf8.Valid(raw) {
		return nil, &FieldError{Field: "body", Msg: "the body is not valid UTF-8"}
	}
	r.Body = io.NopCloser(bytes.NewReader(raw))
	obj, err := DecodeObject(r, limit)
	if err != nil {
		return nil, err
	}
	for _, k := range obj.Keys() {
		if !slices.Contains(known, k) {
			return nil, &FieldError{Field: k, Msg: UnknownMessage("field", k, known)}
		}
	}
	return obj, nil
}
