package httpkit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// DefaultBodyLimit caps request bodies when a decoder is given limit <= 0.
const DefaultBodyLimit int64 = 64 << 10

// Messages of DecodeError, fixed so clients and tests can rely on them.
const (
	MsgUnsupportedMediaType = "Content-Type must be application/json"
	MsgMalformedJSON        = "Request body is not valid JSON"
	MsgNotObject            = "Request body must be a JSON object"
	MsgTrailingData         = "Request body must contain a single JSON object"
	MsgUnreadableBody       = "Request body could not be read"
	MsgInvalidValue         = "Request body has an invalid value"
	// MsgNotUTF8: JSON text is UTF-8 (RFC 8259); encoding/json would
	// silently store U+FFFD in place of each bad byte.
	MsgNotUTF8 = "Request body is not valid UTF-8"
)

// DecodeError is a request body the decoder refused as a whole (wrong media
// type 400, too large 413, malformed 400) or, from Decode, one field of the
// wrong type (400, Field set). Message is client-safe.
type DecodeError struct {
	Status  int
	Field   string
	Message string
	Err     error
}

func (e *DecodeError) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

func (e *DecodeError) Unwrap() error { return e.Err }

// StatusCode lets go-kit's DefaultErrorEncoder pick the status too.
func (e *DecodeError) StatusCode() int { return e.Status }

// FieldError is a field present in an Object with the wrong JSON type or an
// unusable value. Its message ("amount_cents must be an integer") is generic:
// services usually replace it with the contract's exact per-field text.
// It wraps ErrInvalid.
type FieldError struct {
	Field string
	// Want completes "<field> must be ...", e.g. "a string".
	Want string
	// Msg, when set, is the whole message instead (NULMessage).
	Msg string
}

func (e *FieldError) Error() string {
	if e.Msg != "" {
		return e.Msg
	}
	return e.Field + " must be " + e.Want
}

func (e *FieldError) Unwrap() error { return ErrInvalid }

// StatusCode lets go-kit's DefaultErrorEncoder pick the status too.
func (e *FieldError) StatusCode() int { return http.StatusBadRequest }

// readJSONBody applies the checks shared by DecodeObject and Decode and
// returns the body with JSON whitespace trimmed. An empty body without a
// Content-Type is accepted as empty, so a route whose fields are all optional
// or whose "X is required" message is wanted still gets to decide.
func readJSONBody(r *http.Request, limit int64) ([]byte, error) {
	if limit <= 0 {
		limit = DefaultBodyLimit
	}
	ct := r.Header.Get("Content-Type")
	if ct != "" && !isJSONMediaType(ct) {
		return nil, &DecodeError{Status: http.StatusBadRequest, Message: MsgUnsupportedMediaType}
	}
	if r.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	var body []byte
	if r.Body != nil {
		var err error
		body, err = io.ReadAll(io.LimitReader(r.Body, limit+1))
		if err != nil {
			return nil, &DecodeError{Status: http.StatusBadRequest, Message: MsgUnreadableBody, Err: err}
		}
	}
	if int64(len(body)) > limit {
		return nil, tooLarge(limit)
	}
	body = trimJSONSpace(body)
	if ct == "" && len(body) > 0 {
		return nil, &DecodeError{Status: http.StatusBadRequest, Message: MsgUnsupportedMediaType}
	}
	return body, nil
}

func tooLarge(limit int64) *DecodeError {
	return &DecodeError{
		Status:  http.StatusRequestEntityTooLarge,
		Message: fmt.Sprintf("Request body must not exceed %d bytes", limit),
	}
}

// isJSONMediaType accepts application/json with no charset or utf-8: JSON on
// the wire is UTF-8 (RFC 8259), anything else would be misread.
func isJSONMediaType(ct string) bool {
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil && !errors.Is(err, mime.ErrInvalidMediaParameter) {
		return false
	}
	if mt != "application/json" {
		return false
	}
	cs, ok := params["charset"]
	return !ok || strings.EqualFold(cs, "utf-8")
}

func trimJSONSpace(b []byte) []byte {
	return bytes.Trim(b, " \t\r\n")
}

// checkSingleObject rejects malformed JSON, trailing data and non-objects.
func checkSingleObject(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	var first json.RawMessage
	if err := dec.Decode(&first); err != nil {
		return &DecodeError{Status: http.StatusBadRequest, Message: MsgMalformedJSON, Err: err}
	}
	var rest json.RawMessage
	if err := dec.Decode(&rest); !errors.Is(err, io.EOF) {
		return &DecodeError{Status: http.StatusBadRequest, Message: MsgTrailingData}
	}
	if len(first) == 0 || first[0] != '{' {
		return &DecodeError{Status: http.StatusBadRequest, Message: MsgNotObject}
	}
	return nil
}

// DecodeObject reads a JSON object body: Content-Type application/json (400
// otherwise, since the contract's envelope has no 415; an empty body may omit it), at most limit bytes (413 beyond;
// limit <= 0 means DefaultBodyLimit), one well-formed object and nothing
// after it (400). An empty body is an empty Object. Errors are *DecodeError.
// Fields are then read with the typed accessors, which report absence and
// wrong types separately so the caller picks the contract's message.
// Duplicate keys keep the last value, as JavaScript's JSON.parse does.
func DecodeObject(r *http.Request, limit int64) (Object, error) {
	body, err := readJSONBody(r, limit)
	if err != nil {
		return nil, err
	}
	return parseObject(body)
}

func parseObject(body []byte) (Object, error) {
	if len(body) == 0 {
		return Object{}, nil
	}
	// The usual body is one well-formed object: json.Unmarshal alone
	// proves it (it refuses malformed text and anything after the value,
	// and a body starting with '{' decodes only as an object), so the
	// checks below, which tell the client which rule the body broke, run
	// only for a body that breaks one. A third of a refund's decoding.
	if body[0] == '{' && utf8.Valid(body) && !bytes.Contains(body, []byte(`\u0000`)) {
		obj := Object{}
		if json.Unmarshal(body, &obj) == nil {
			return obj, nil
		}
	}
	if err := checkSingleObject(body); err != nil {
		return nil, err
	}
	if !utf8.Valid(body) {
		return nil, &DecodeError{Status: http.StatusBadRequest, Message: MsgNotUTF8}
	}
	if err := CheckNUL(body); err != nil {
		return nil, err
	}
	obj := Object{}
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, &DecodeError{Status: http.StatusBadRequest, Message: MsgMalformedJSON, Err: err}
	}
	return obj, nil
}

// MsgNULFieldNames refuses a NUL character in a key of the top-level object.
const MsgNULFieldNames = "Request body field names must not contain the NUL character"

// NULMessage is the message refusing a value of field that contains the NUL
// character (U+0000).
func NULMessage(field string) string { return field + " must not contain the NUL character" }

// CheckNUL refuses a JSON text in which any string, key or value at any
// depth, contains U+0000 (written \u0000: a raw NUL byte is already
// malformed JSON). Postgres text and jsonb cannot hold it, so such a value
// would fail in the database as a 500; DecodeObject and Decode call this
// before any handler sees the body. The error is a 400 *DecodeError whose
// Field is the value's path ("additional_data.event_name", "tags[1]"; for a
// key, the path of its object) and whose Message is NULMessage(Field).
// Malformed JSON is not this function's concern: it returns nil and leaves
// the parse to report it.
func CheckNUL(body []byte) error {
	if !bytes.Contains(body, []byte(`\u0000`)) {
		return nil // the only way to write U+0000 in valid JSON
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	field, found, err := findNUL(dec, "")
	if err != nil || !found {
		return nil
	}
	msg := MsgNULFieldNames
	if field != "" {
		msg = NULMessage(field)
	}
	return &DecodeError{Status: http.StatusBadRequest, Field: field, Message: msg}
}

// findNUL walks one JSON value and reports the path of the first string
// holding U+0000.
func findNUL(dec *json.Decoder, path string) (string, bool, error) {
	tok, err := dec.Token()
	if err != nil {
		return "", false, err
	}
	switch v := tok.(type) {
	case string:
		return path, strings.IndexByte(v, 0) >= 0, nil
	case json.Delim:
		switch v {
		case '{':
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return "", false, err
				}
				key, _ := kt.(string)
				if strings.IndexByte(key, 0) >= 0 {
					return path, true, nil
				}
				sub := key
				if path != "" {
					sub = path + "." + key
				}
				if f, found, err := findNUL(dec, sub); err != nil || found {
					return f, found, err
				}
			}
		case '[':
			for i := 0; dec.More(); i++ {
				if f, found, err := findNUL(dec, path+"["+strconv.Itoa(i)+"]"); err != nil || found {
					return f, found, err
				}
			}
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return "", false, err
		}
	}
	return "", false, nil
}

// DecodeOption adjusts Decode.
type DecodeOption func(*decodeConfig)

type decodeConfig struct {
	disallowUnknown bool
}

// DisallowUnknownFields makes Decode refuse fields dst does not declare. Off
// by default: integrators' clients send extra fields the contract tolerates.
func DisallowUnknownFields() DecodeOption {
	return func(c *decodeConfig) { c.disallowUnknown = true }
}

// Decode reads a JSON object body into dst (a pointer to a struct) with the
// same checks as DecodeObject. A field of the wrong type gives a *DecodeError
// naming it ("amount_cents must be an integer"); values rejected by a
// field's own UnmarshalJSON (time.Time) give the generic MsgInvalidValue,
// since encoding/json does not say which field failed: use DecodeObject where
// the contract needs a per-field message.
func Decode(r *http.Request, dst any, limit int64, opts ...DecodeOption) error {
	var cfg decodeConfig
	for _, opt := range opts {
		if opt != nil {
			opt(&cfg)
		}
	}
	body, err := readJSONBody(r, limit)
	if err != nil {
		return err
	}
	if len(body) == 0 {
		body = []byte("{}")
	}
	if err := checkSingleObject(body); err != nil {
		return err
	}
	if !utf8.Valid(body) {
		return &DecodeError{Status: http.StatusBadRequest, Message: MsgNotUTF8}
	}
	if err := CheckNUL(body); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if cfg.disallowUnknown {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(dst); err != nil {
		return mapDecodeError(err)
	}
	return nil
}

func mapDecodeError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			return &DecodeError{Status: http.StatusBadRequest, Message: MsgNotObject, Err: err}
		}
		return &DecodeError{
			Status:  http.StatusBadRequest,
			Field:   field,
			Message: field + " must be " + describeType(te.Type),
			Err:     err,
		}
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return &DecodeError{Status: http.StatusBadRequest, Message: MsgMalformedJSON, Err: err}
	}
	// encoding/json reports unknown fields only as text.
	const unknownPrefix = `json: unknown field "`
	if msg := err.Error(); strings.HasPrefix(msg, unknownPrefix) {
		field := strings.TrimSuffix(strings.TrimPrefix(msg, unknownPrefix), `"`)
		return &DecodeError{
			Status:  http.StatusBadRequest,
			Field:   field,
			Message: field + " is not an accepted field",
			Err:     err,
		}
	}
	return &DecodeError{Status: http.StatusBadRequest, Message: MsgInvalidValue, Err: err}
}

func describeType(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "valid"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "a boolean"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	default:
		return "valid"
	}
}

// Object is a decoded JSON object whose values are read on demand.
//
// Every accessor returns (value, present, err): present is false when the key
// is absent or null (JavaScript clients send null for "not set"); err is a
// *FieldError when the key is present with the wrong type or an unusable
// value. Required-field checks are therefore `if !ok || err != nil`.
type Object map[string]json.RawMessage

// Has reports whether key is present, null included.
func (o Object) Has(key string) bool {
	_, ok := o[key]
	return ok
}

// IsNull reports whether key is present with the value null.
func (o Object) IsNull(key string) bool {
	raw, ok := o[key]
	return ok && string(raw) == "null"
}

// Keys returns the object's keys in sorted order.
func (o Object) Keys() []string {
	keys := make([]string, 0, len(o))
	for k := range o {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Raw returns the undecoded value, absent and null reported as not present.
func (o Object) Raw(key string) (json.RawMessage, bool) {
	raw, ok := o[key]
	if !ok || len(raw) == 0 || string(raw) == "null" {
		return nil, false
	}
	return raw, true
}

// String reads a JSON string.
func (o Object) String(key string) (string, bool, error) {
	raw, ok := o.Raw(key)
	if !ok {
		return "", false, nil
	}
	if raw[0] != '"' {
		return "", true, &FieldError{Field: key, Want: "a string"}
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", true, &FieldError{Field: key, Want: "a string"}
	}
	if strings.IndexByte(s, 0) >= 0 {
		return "", true, &FieldError{Field: key, Want: "a string", Msg: NULMessage(key)}
	}
	return s, true, nil
}

// Int reads a whole JSON number within int64. 1.0 and 1e2 are whole and
// accepted (JavaScript's Number.isInteger agrees); 1.5 and "1" are not.
func (o Object) Int(key string) (int64, bool, error) {
	raw, ok := o.Raw(key)
	if !ok {
		return 0, false, nil
	}
	n, good := parseWholeNumber(raw)
	if !good {
		return 0, true, &FieldError{Field: key, Want: "an integer"}
	}
	return n, true, nil
}

func isJSONNumber(raw []byte) bool {
	return len(raw) > 0 && (raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9'))
}

func parseWholeNumber(raw []byte) (int64, bool) {
	if !isJSONNumber(raw) {
		return 0, false
	}
	s := string(raw)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, true
	}
	if !strings.ContainsAny(s, ".eE") {
		return 0, false // an integer literal beyond int64
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) || f != math.Trunc(f) {
		return 0, false
	}
	// -2^63 converts exactly; 2^63 does not fit.
	if f < -9223372036854775808 || f >= 9223372036854775808 {
		return 0, false
	}
	return int64(f), true
}

// Number reads a finite JSON number. Strings are refused.
func (o Object) Number(key string) (float64, bool, error) {
	raw, ok := o.Raw(key)
	if !ok {
		return 0, false, nil
	}
	if !isJSONNumber(raw) {
		return 0, true, &FieldError{Field: key, Want: "a number"}
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsInf(f, 0) {
		return 0, true, &FieldError{Field: key, Want: "a number"}
	}
	return f, true, nil
}

// Bool reads true or false.
func (o Object) Bool(key string) (bool, bool, error) {
	raw, ok := o.Raw(key)
	if !ok {
		return false, false, nil
	}
	switch string(raw) {
	case "true":
		return true, true, nil
	case "false":
		return false, true, nil
	default:
		return false, true, &FieldError{Field: key, Want: "a boolean"}
	}
}

// Object reads a nested JSON object.
func (o Object) Object(key string) (Object, bool, error) {
	raw, ok := o.Raw(key)
	if !ok {
		return nil, false, nil
	}
	if raw[0] != '{' {
		return nil, true, &FieldError{Field: key, Want: "an object"}
	}
	var sub Object
	if err := json.Unmarshal(raw, &sub); err != nil {
		return nil, true, &FieldError{Field: key, Want: "an object"}
	}
	var de *DecodeError
	if errors.As(CheckNUL(raw), &de) {
		return nil, true, &FieldError{Field: key, Want: "an object", Msg: NULMessage(strings.TrimSuffix(key+"."+de.Field, "."))}
	}
	return sub, true, nil
}

// StringOrInt reads an identifier sent either as a whole JSON number or as a
// string of decimal digits (program_id: 42 or "42").
func (o Object) StringOrInt(key string) (int64, bool, error) {
	raw, ok := o.Raw(key)
	if !ok {
		return 0, false, nil
	}
	want := &FieldError{Field: key, Want: "an integer or a string of digits"}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, true, want
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || s == "" || s[0] == '+' {
			return 0, true, want
		}
		return n, true, nil
	}
	n, good := parseWholeNumber(raw)
	if !good {
		return 0, true, want
	}
	return n, true, nil
}

// StringSlice reads an array of strings; null elements are refused.
func (o Object) StringSlice(key string) ([]string, bool, error) {
	raw, ok := o.Raw(key)
	if !ok {
		return nil, false, nil
	}
	want := &FieldError{Field: key, Want: "an array of strings"}
	if raw[0] != '[' {
		return nil, true, want
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, true, want
	}
	out := make([]string, 0, len(items))
	for _, item := range items {
		if len(item) == 0 || item[0] != '"' {
			return nil, true, want
		}
		var s string
		if err := json.Unmarshal(item, &s); err != nil {
			return nil, true, want
		}
		if strings.IndexByte(s, 0) >= 0 {
			return nil, true, &FieldError{Field: key, Want: want.Want, Msg: NULMessage(key)}
		}
		out = append(out, s)
	}
	return out, true, nil
}

// Time reads an RFC 3339 string with an offset ("2025-05-01T10:00:00Z",
// fractional seconds allowed); impossible dates such as Feb 30 are refused.
func (o Object) Time(key string) (time.Time, bool, error) {
	s, ok, err := o.String(key)
	if !ok || err != nil {
		if err != nil {
			err = &FieldError{Field: key, Want: "an RFC 3339 time"}
		}
		return time.Time{}, ok, err
	}
	t, perr := time.Parse(time.RFC3339, s)
	if perr != nil {
		return time.Time{}, true, &FieldError{Field: key, Want: "an RFC 3339 time"}
	}
	return t, true, nil
}

// CheckValuesNUL refuses query or form values (or their names) containing
// the NUL character, as CheckNUL does for a body: a 400 *DecodeError naming
// the parameter ("state must not contain the NUL character"), the first in
// sorted order. Decoders call it on every query and form they read.
func CheckValuesNUL(values url.Values) error {
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if strings.IndexByte(k, 0) >= 0 {
			return &DecodeError{Status: http.StatusBadRequest, Message: "Parameter names must not contain the NUL character"}
		}
		for _, v := range values[k] {
			if strings.IndexByte(v, 0) >= 0 {
				return &DecodeError{Status: http.StatusBadRequest, Field: k, Message: NULMessage(k)}
			}
		}
	}
	return nil
}
