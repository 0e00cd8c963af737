// Package httpkit holds the HTTP plumbing every service shares: the two error
// envelopes of the interface contract, request ids, strict JSON decoding,
// client IP resolution behind trusted proxies, and go-kit transport glue.
// It holds no business rules: services decide messages and codes.
package httpkit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"unicode"
)

// ContentTypeJSON is the Content-Type of every JSON body written here.
const ContentTypeJSON = "application/json; charset=utf-8"

// statusNames fixes error.name for the statuses the contract names, plus the
// ones we answer ourselves (413, 429, 503, 504) so clients get a stable
// name instead of one derived from Go's status text.
var statusNames = map[int]string{
	http.StatusBadRequest:            "BadRequestError",
	http.StatusUnauthorized:          "UnauthorizedError",
	http.StatusForbidden:             "ForbiddenError",
	http.StatusNotFound:              "NotFoundError",
	http.StatusMethodNotAllowed:      "MethodNotAllowedError",
	http.StatusConflict:              "ConflictError",
	http.StatusGone:                  "GoneError",
	http.StatusRequestEntityTooLarge: "PayloadTooLargeError",
	http.StatusUnsupportedMediaType:  "UnsupportedMediaTypeError",
	http.StatusUnprocessableEntity:   "UnprocessableEntityError",
	http.StatusTooManyRequests:       "TooManyRequestsError",
	http.StatusInternalServerError:   "InternalServerError",
	http.StatusServiceUnavailable:    "ServiceUnavailableError",
	http.StatusGatewayTimeout:        "GatewayTimeoutError",
}

// StatusName is the platform envelope's error.name for an HTTP status.
// Statuses outside the fixed table get Go's status text in CamelCase with an
// "Error" suffix (408 -> "RequestTimeoutError"); unknown codes get "Error".
func StatusName(status int) string {
	if name, ok := statusNames[status]; ok {
		return name
	}
	text := http.StatusText(status)
	if text == "" {
		return "Error"
	}
	var b strings.Builder
	for word := range strings.FieldsSeq(text) {
		runes := []rune(word)
		for i, r := range runes {
			if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
				continue
			}
			if i == 0 {
				r = unicode.ToUpper(r)
			}
			b.WriteRune(r)
		}
	}
	name := b.String()
	if !strings.HasSuffix(name, "Error") {
		name += "Error"
	}
	return name
}

// Marshal encodes v as compact JSON without HTML escaping, so messages such as
// "Expected: Bearer <token>" keep their angle brackets byte for byte
// (encoding/json's default would write \u003c), and without the trailing
// newline json.Encoder adds.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// WriteJSON writes v as the response body with the given status. The value is
// encoded before anything is written, so an unencodable value turns into a
// clean 500 platform envelope rather than a half-written body; the encoding
// error is returned for the caller to log.
func WriteJSON(w http.ResponseWriter, status int, v any) error {
	body, err := Marshal(v)
	if err != nil {
		writeInternalFallback(w)
		return fmt.Errorf("encode json response: %w", err)
	}
	return writeBody(w, status, body)
}

func writeBody(w http.ResponseWriter, status int, body []byte) error {
	w.Header().Set("Content-Type", ContentTypeJSON)
	w.WriteHeader(status)
	if _, err := w.Write(body); err != nil {
		return fmt.Errorf("write response body: %w", err)
	}
	return nil
}

// writeInternalFallback is written when our own encoding fails; the bytes are
// fixed so it cannot fail in turn.
func writeInternalFallback(w http.ResponseWriter) {
	const body = `{"data":null,"error":{"status":500,"name":"InternalServerError","message":"Internal Server Error","details":{}}}`
	_ = writeBody(w, http.StatusInternalServerError, []byte(body))
}

// EnvelopeOption adjusts an error envelope. Each option says which envelope
// it applies to; the other one ignores it.
type EnvelopeOption func(*envelopeConfig)

type envelopeConfig struct {
	code        string
	details     map[string]any
	statusField bool
	top         map[string]any
}

// WithCode sets the platform envelope's error.code (omitted when empty).
// Platform envelope only: the typed envelope takes its code as an argument.
func WithCode(code string) EnvelopeOption {
	return func(c *envelopeConfig) { c.code = code }
}

// WithDetails sets the platform envelope's error.details. Platform envelope
// only. Keys are written in sorted order.
func WithDetails(details map[string]any) EnvelopeOption {
	return func(c *envelopeConfig) {
		if c.details == nil {
			c.details = make(map[string]any, len(details))
		}
		for k, v := range details {
			c.details[k] = v
		}
	}
}

// WithDetail adds one key to the platform envelope's error.details.
func WithDetail(key string, value any) EnvelopeOption {
	return WithDetails(map[string]any{key: value})
}

// WithStatusField makes the typed envelope carry "status" as its first field,
// as the rate-limit envelope does. Typed envelope only.
func WithStatusField() EnvelopeOption {
	return func(c *envelopeConfig) { c.statusField = true }
}

// WithTopLevel adds sibling keys next to the envelope's "error" (and "data"),
// e.g. click 410's success:false and message, or a warnings array. Keys that
// would clash with the envelope's own ("data", "error") are dropped. Both
// envelopes.
func WithTopLevel(fields map[string]any) EnvelopeOption {
	return func(c *envelopeConfig) {
		if c.top == nil {
			c.top = make(map[string]any, len(fields))
		}
		for k, v := range fields {
			c.top[k] = v
		}
	}
}

func newEnvelopeConfig(opts []EnvelopeOption) envelopeConfig {
	var c envelopeConfig
	for _, opt := range opts {
		if opt != nil {
			opt(&c)
		}
	}
	return c
}

// platformError fixes the field order of the platform envelope's error object.
type platformError struct {
	Status  int            `json:"status"`
	Name    string         `json:"name"`
	Message string         `json:"message"`
	Details map[string]any `json:"details"`
	Code    string         `json:"code,omitempty"`
}

// PlatformBody builds the platform envelope
// {"data":null,"error":{"status":..,"name":..,"message":..,"details":{..},"code":..}}
// without writing it. details is always an object, never null.
func PlatformBody(status int, message string, opts ...EnvelopeOption) ([]byte, error) {
	c := newEnvelopeConfig(opts)
	details := c.details
	if details == nil {
		details = map[string]any{}
	}
	errObj, err := Marshal(platformError{
		Status:  status,
		Name:    StatusName(status),
		Message: message,
		Details: details,
		Code:    c.code,
	})
	if err != nil {
		return nil, fmt.Errorf("encode platform error: %w", err)
	}
	return orderedObject([]rawField{{"data", []byte("null")}, {"error", errObj}}, c.top, "data", "error")
}

// WritePlatformError writes the platform envelope with the given status.
func WritePlatformError(w http.ResponseWriter, status int, message string, opts ...EnvelopeOption) error {
	body, err := PlatformBody(status, message, opts...)
	if err != nil {
		writeInternalFallback(w)
		return err
	}
	return writeBody(w, status, body)
}

// TypedBody builds the typed envelope {"error":{"code":..,"message":..,<extra>}}
// (no "data" key) without writing it. With WithStatusField, "status" comes
// first. Extra keys follow in sorted order; extra keys named code, message or
// status are dropped so the envelope's own fields cannot be overridden.
func TypedBody(status int, code, message string, extra map[string]any, opts ...EnvelopeOption) ([]byte, error) {
	c := newEnvelopeConfig(opts)
	fields := make([]rawField, 0, 3+len(extra))
	if c.statusField {
		fields = append(fields, rawField{"status", []byte(fmt.Sprint(status))})
	}
	for _, f := range []struct {
		key string
		val string
	}{{"code", code}, {"message", message}} {
		raw, err := Marshal(f.val)
		if err != nil {
			return nil, fmt.Errorf("encode typed error %s: %w", f.key, err)
		}
		fields = append(fields, rawField{f.key, raw})
	}
	errObj, err := orderedObject(fields, extra, "code", "message", "status")
	if err != nil {
		return nil, fmt.Errorf("encode typed error: %w", err)
	}
	return orderedObject([]rawField{{"error", errObj}}, c.top, "data", "error")
}

// WriteTypedError writes the typed envelope with the given status.
func WriteTypedError(w http.ResponseWriter, status int, code, message string, extra map[string]any, opts ...EnvelopeOption) error {
	body, err := TypedBody(status, code, message, extra, opts...)
	if err != nil {
		writeInternalFallback(w)
		return err
	}
	return writeBody(w, status, body)
}

type rawField struct {
	key string
	raw []byte
}

// orderedObject writes fixed fields in their order, then the extra map's
// fields in sorted key order, skipping reserved keys. encoding/json cannot
// mix a fixed order with open-ended keys, hence the hand-built object.
func orderedObject(fixed []rawField, extra map[string]any, reserved ...string) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	n := 0
	add := func(key string, raw []byte) error {
		k, err := Marshal(key)
		if err != nil {
			return err
		}
		if n > 0 {
			buf.WriteByte(',')
		}
		buf.Write(k)
		buf.WriteByte(':')
		buf.Write(raw)
		n++
		return nil
	}
	for _, f := range fixed {
		if err := add(f.key, f.raw); err != nil {
			return nil, err
		}
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		if !slices.Contains(reserved, k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		raw, err := Marshal(extra[k])
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", k, err)
		}
		if err := add(k, raw); err != nil {
			return nil, err
		}
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// WriteServerErrorWithRequestID writes a 500 in the platform envelope the way
// the command-line routes answer: the request id closes error.message as
// "(request_id: <id>)" and is repeated in error.details.request_id, so a user
// can quote it from the terminal.
func WriteServerErrorWithRequestID(ctx context.Context, w http.ResponseWriter, message string) error {
	id := RequestIDFrom(ctx)
	return WritePlatformError(w, http.StatusInternalServerError, message+" (request_id: "+id+")", WithDetail("request_id", id))
}
