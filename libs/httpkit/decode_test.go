package httpkit_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/httpkit"
)

func jsonRequest(body string, contentType string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	return r
}

// unknownLength hides the body length, as a chunked request does.
func unknownLength(r *http.Request) *http.Request {
	r.ContentLength = -1
	r.Body = io.NopCloser(io.MultiReader(r.Body))
	return r
}

func wantDecodeError(t *testing.T, err error, status int, message string) {
	t.Helper()
	var de *httpkit.DecodeError
	if !errors.As(err, &de) {
		t.Fatalf("err = %v, want *DecodeError", err)
	}
	if de.Status != status {
		t.Errorf("status = %d, want %d", de.Status, status)
	}
	if message != "" && de.Message != message {
		t.Errorf("message = %q, want %q", de.Message, message)
	}
	if got := httpkit.KindStatus(err); got != status {
		t.Errorf("KindStatus = %d, want %d", got, status)
	}
}

func TestDecodeObjectContentType(t *testing.T) {
	tests := []struct {
		name        string
		contentType string
		body        string
		wantErr     bool
	}{
		{"plain json", "application/json", `{}`, false},
		{"utf-8 charset", "application/json; charset=utf-8", `{}`, false},
		{"charset case-insensitive", "Application/JSON; charset=UTF-8", `{}`, false},
		{"other charset refused", "application/json; charset=latin1", `{}`, true},
		{"text/plain refused", "text/plain", `{}`, true},
		{"form refused", "application/x-www-form-urlencoded", `a=1`, true},
		{"json suffix type refused", "application/vnd.api+json", `{}`, true},
		{"garbage refused", ";;;", `{}`, true},
		{"missing with body refused", "", `{"a":1}`, true},
		{"missing with empty body accepted", "", ``, false},
		{"wrong type with empty body refused", "text/plain", ``, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := httpkit.DecodeObject(jsonRequest(tt.body, tt.contentType), 0)
			if !tt.wantErr {
				if err != nil {
					t.Fatalf("DecodeObject: %v", err)
				}
				return
			}
			wantDecodeError(t, err, http.StatusBadRequest, httpkit.MsgUnsupportedMediaType)
		})
	}
}

func TestDecodeObjectSizeLimit(t *testing.T) {
	const limit = 64
	// A JSON object of exactly n bytes: {"a":"xxx..."}.
	objectOf := func(n int) string { return `{"a":"` + strings.Repeat("x", n-8) + `"}` }
	tests := []struct {
		name     string
		body     string
		chunked  bool
		tooLarge bool
	}{
		{"exactly the limit", objectOf(limit), false, false},
		{"limit plus one", objectOf(limit + 1), false, true},
		{"exactly the limit, length unknown", objectOf(limit), true, false},
		{"limit plus one, length unknown", objectOf(limit + 1), true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if len(tt.body) != limit && !tt.tooLarge || len(tt.body) != limit+1 && tt.tooLarge {
				t.Fatalf("bad fixture length %d", len(tt.body))
			}
			r := jsonRequest(tt.body, "application/json")
			if tt.chunked {
				r = unknownLength(r)
			}
			obj, err := httpkit.DecodeObject(r, limit)
			if tt.tooLarge {
				wantDecodeError(t, err, http.StatusRequestEntityTooLarge, "Request body must not exceed 64 bytes")
				return
			}
			if err != nil {
				t.Fatalf("DecodeObject: %v", err)
			}
			if !obj.Has("a") {
				t.Error("decoded object lacks key a")
			}
		})
	}
}

func TestDecodeObjectDefaultLimitIs64KiB(t *testing.T) {
	at := `{"a":"` + strings.Repeat("x", 64<<10-8) + `"}`
	if _, err := httpkit.DecodeObject(jsonRequest(at, "application/json"), 0); err != nil {
		t.Fatalf("at 64 KiB: %v", err)
	}
	over := `{"a":"` + strings.Repeat("x", 64<<10-7) + `"}`
	_, err := httpkit.DecodeObject(jsonRequest(over, "application/json"), 0)
	wantDecodeError(t, err, http.StatusRequestEntityTooLarge, "Request body must not exceed 65536 bytes")
}

func TestDecodeObjectShape(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		wantMsg string
		keys    []string
	}{
		{"object", `{"a":1,"b":"x"}`, "", []string{"a", "b"}},
		{"surrounding whitespace", " \n\t{\"a\":1}\r\n ", "", []string{"a"}},
		{"empty body is empty object", ``, "", []string{}},
		{"whitespace-only body is empty object", "  \n", "", []string{}},
		{"duplicate key keeps last", `{"a":1,"a":2}`, "", []string{"a"}},
		{"malformed", `{"a":`, httpkit.MsgMalformedJSON, nil},
		{"single quotes", `{'a':1}`, httpkit.MsgMalformedJSON, nil},
		{"array", `[1,2]`, httpkit.MsgNotObject, nil},
		{"string", `"x"`, httpkit.MsgNotObject, nil},
		{"null", `null`, httpkit.MsgNotObject, nil},
		{"number", `1`, httpkit.MsgNotObject, nil},
		{"trailing object", `{"a":1}{"b":2}`, httpkit.MsgTrailingData, nil},
		{"trailing garbage", `{"a":1} x`, httpkit.MsgTrailingData, nil},
		{"trailing brace", `{"a":1}}`, httpkit.MsgTrailingData, nil},
		{"a byte that is not UTF-8 in a value", "{\"a\":\"x\x80y\"}", httpkit.MsgNotUTF8, nil},
		{"a byte that is not UTF-8 in a key", "{\"\xff\":1}", httpkit.MsgNotUTF8, nil},
		{"a truncated character", "{\"a\":\"\xe2\x82\"}", httpkit.MsgNotUTF8, nil},
		{"UTF-8 and an escaped character", "{\"a\":\"\u20ac \\u00e9\"}", "", []string{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj, err := httpkit.DecodeObject(jsonRequest(tt.body, "application/json"), 0)
			if tt.wantMsg != "" {
				wantDecodeError(t, err, http.StatusBadRequest, tt.wantMsg)
				return
			}
			if err != nil {
				t.Fatalf("DecodeObject: %v", err)
			}
			if got := obj.Keys(); strings.Join(got, ",") != strings.Join(tt.keys, ",") {
				t.Errorf("keys = %v, want %v", got, tt.keys)
			}
		})
	}
}

func TestDecodeObjectDuplicateKeyKeepsLastValue(t *testing.T) {
	obj, err := httpkit.DecodeObject(jsonRequest(`{"a":1,"a":2}`, "application/json"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if n, _, _ := obj.Int("a"); n != 2 {
		t.Errorf("a = %d, want 2", n)
	}
}

func TestDecodeObjectReadFailureIsBadRequest(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/", io.MultiReader(strings.NewReader(`{"a"`), errReader{}))
	r.Header.Set("Content-Type", "application/json")
	r.ContentLength = -1
	_, err := httpkit.DecodeObject(r, 0)
	wantDecodeError(t, err, http.StatusBadRequest, httpkit.MsgUnreadableBody)
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

// accessorCase runs one accessor on the object {"k": raw}.
type accessorCase struct {
	name    string
	raw     string // JSON value of key "k"; "" means the key is absent
	want    any
	present bool
	typeErr bool
}

func objectWith(t *testing.T, raw string) httpkit.Object {
	t.Helper()
	body := `{}`
	if raw != "" {
		body = `{"k":` + raw + `}`
	}
	obj, err := httpkit.DecodeObject(jsonRequest(body, "application/json"), 0)
	if err != nil {
		t.Fatalf("DecodeObject(%s): %v", body, err)
	}
	return obj
}

func runAccessor[T any](t *testing.T, cases []accessorCase, get func(httpkit.Object) (T, bool, error), want string) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			v, ok, err := get(objectWith(t, tt.raw))
			if ok != tt.present {
				t.Errorf("present = %v, want %v", ok, tt.present)
			}
			if tt.typeErr {
				var fe *httpkit.FieldError
				if !errors.As(err, &fe) {
					t.Fatalf("err = %v, want *FieldError", err)
				}
				if fe.Field != "k" || fe.Error() != "k must be "+want {
					t.Errorf("FieldError = %+v (%q)", fe, fe.Error())
				}
				if !errors.Is(err, httpkit.ErrInvalid) {
					t.Error("FieldError does not wrap ErrInvalid")
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if tt.want != nil {
				gotJSON, _ := json.Marshal(v)
				wantJSON, _ := json.Marshal(tt.want)
				if !bytes.Equal(gotJSON, wantJSON) {
					t.Errorf("value = %s, want %s", gotJSON, wantJSON)
				}
			}
		})
	}
}

func TestObjectString(t *testing.T) {
	runAccessor(t, []accessorCase{
		{"string", `"txn_1"`, "txn_1", true, false},
		{"empty string is present", `""`, "", true, false},
		{"escaped", `"a\u00e9\n"`, "aé\n", true, false},
		{"absent", ``, "", false, false},
		{"null is absent", `null`, "", false, false},
		{"number", `1`, nil, true, true},
		{"boolean", `true`, nil, true, true},
		{"object", `{}`, nil, true, true},
		{"array", `["a"]`, nil, true, true},
	}, func(o httpkit.Object) (string, bool, error) { return o.String("k") }, "a string")
}

func TestObjectInt(t *testing.T) {
	runAccessor(t, []accessorCase{
		{"integer", `1999`, int64(1999), true, false},
		{"negative", `-5`, int64(-5), true, false},
		{"zero", `0`, int64(0), true, false},
		{"whole float", `1.0`, int64(1), true, false},
		{"exponent", `1e2`, int64(100), true, false},
		{"int64 max", `9223372036854775807`, int64(9223372036854775807), true, false},
		{"absent", ``, nil, false, false},
		{"null", `null`, nil, false, false},
		{"fraction", `1.5`, nil, true, true},
		{"numeric string", `"1"`, nil, true, true},
		{"beyond int64", `9223372036854775808`, nil, true, true},
		{"huge exponent", `1e400`, nil, true, true},
		{"boolean", `false`, nil, true, true},
	}, func(o httpkit.Object) (int64, bool, error) { return o.Int("k") }, "an integer")
}

func TestObjectNumber(t *testing.T) {
	runAccessor(t, []accessorCase{
		{"integer", `10`, 10.0, true, false},
		{"fraction", `12.5`, 12.5, true, false},
		{"negative", `-0.25`, -0.25, true, false},
		{"absent", ``, nil, false, false},
		{"numeric string", `"10"`, nil, true, true},
		{"overflow", `1e400`, nil, true, true},
		{"boolean", `true`, nil, true, true},
	}, func(o httpkit.Object) (float64, bool, error) { return o.Number("k") }, "a number")
}

func TestObjectBool(t *testing.T) {
	runAccessor(t, []accessorCase{
		{"true", `true`, true, true, false},
		{"false", `false`, false, true, false},
		{"absent", ``, nil, false, false},
		{"string true", `"true"`, nil, true, true},
		{"one", `1`, nil, true, true},
	}, func(o httpkit.Object) (bool, bool, error) { return o.Bool("k") }, "a boolean")
}

func TestObjectObject(t *testing.T) {
	runAccessor(t, []accessorCase{
		{"object", `{"test_mode":true}`, map[string]bool{"test_mode": true}, true, false},
		{"empty", `{}`, map[string]any{}, true, false},
		{"absent", ``, nil, false, false},
		{"array", `[]`, nil, true, true},
		{"string", `"{}"`, nil, true, true},
	}, func(o httpkit.Object) (httpkit.Object, bool, error) { return o.Object("k") }, "an object")
}

func TestObjectStringOrInt(t *testing.T) {
	runAccessor(t, []accessorCase{
		{"integer", `42`, int64(42), true, false},
		{"numeric string", `"42"`, int64(42), true, false},
		{"absent", ``, nil, false, false},
		{"null", `null`, nil, false, false},
		{"fraction", `4.2`, nil, true, true},
		{"word", `"abc"`, nil, true, true},
		{"empty string", `""`, nil, true, true},
		{"plus sign", `"+4"`, nil, true, true},
		{"padded", `" 4"`, nil, true, true},
		{"boolean", `true`, nil, true, true},
	}, func(o httpkit.Object) (int64, bool, error) { return o.StringOrInt("k") }, "an integer or a string of digits")
}

func TestObjectStringSlice(t *testing.T) {
	runAccessor(t, []accessorCase{
		{"strings", `["a","b"]`, []string{"a", "b"}, true, false},
		{"empty", `[]`, []string{}, true, false},
		{"absent", ``, nil, false, false},
		{"mixed", `["a",1]`, nil, true, true},
		{"null element", `["a",null]`, nil, true, true},
		{"string", `"a"`, nil, true, true},
	}, func(o httpkit.Object) ([]string, bool, error) { return o.StringSlice("k") }, "an array of strings")
}

func TestObjectTime(t *testing.T) {
	runAccessor(t, []accessorCase{
		{"utc", `"2025-05-01T10:00:00Z"`, time.Date(2025, 5, 1, 10, 0, 0, 0, time.UTC), true, false},
		{"offset and fraction", `"2025-05-01T12:00:00.5+02:00"`, time.Date(2025, 5, 1, 10, 0, 0, 5e8, time.UTC), true, false},
		{"absent", ``, nil, false, false},
		{"no offset", `"2025-05-01T10:00:00"`, nil, true, true},
		{"date only", `"2025-05-01"`, nil, true, true},
		{"impossible date", `"2025-02-30T10:00:00Z"`, nil, true, true},
		{"number", `1714557600`, nil, true, true},
	}, func(o httpkit.Object) (time.Time, bool, error) {
		v, ok, err := o.Time("k")
		return v.UTC(), ok, err
	}, "an RFC 3339 time")
}

func TestObjectHasAndIsNull(t *testing.T) {
	obj := objectWith(t, `null`)
	if !obj.Has("k") || !obj.IsNull("k") {
		t.Errorf("Has = %v, IsNull = %v; want both true", obj.Has("k"), obj.IsNull("k"))
	}
	if obj.Has("missing") || obj.IsNull("missing") {
		t.Error("missing key reported present")
	}
}

type saleBody struct {
	TransactionID string  `json:"transaction_id"`
	AmountCents   int64   `json:"amount_cents"`
	Livemode      *bool   `json:"livemode"`
	Rate          float64 `json:"rate"`
	Extra         struct {
		TestMode bool `json:"test_mode"`
	} `json:"additional_data"`
	Tags []string  `json:"tags"`
	At   time.Time `json:"occurred_at"`
}

func TestDecodeIntoStruct(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		opts    []httpkit.DecodeOption
		field   string
		message string
	}{
		{"valid", `{"transaction_id":"t1","amount_cents":100,"livemode":true,"additional_data":{"test_mode":true}}`, nil, "", ""},
		{"empty body decodes to zero value", ``, nil, "", ""},
		{"unknown fields allowed by default", `{"transaction_id":"t1","metadata":{"x":1}}`, nil, "", ""},
		{"string for integer", `{"amount_cents":"100"}`, nil, "amount_cents", "amount_cents must be an integer"},
		{"fraction for integer", `{"amount_cents":1.5}`, nil, "amount_cents", "amount_cents must be an integer"},
		{"number for string", `{"transaction_id":5}`, nil, "transaction_id", "transaction_id must be a string"},
		{"string for boolean", `{"livemode":"yes"}`, nil, "livemode", "livemode must be a boolean"},
		{"string for number", `{"rate":"x"}`, nil, "rate", "rate must be a number"},
		{"nested field named by path", `{"additional_data":{"test_mode":1}}`, nil, "additional_data.test_mode", "additional_data.test_mode must be a boolean"},
		{"object for array", `{"tags":{}}`, nil, "tags", "tags must be an array"},
		{"array for object", `{"additional_data":[]}`, nil, "additional_data", "additional_data must be an object"},
		{"unknown field refused when asked", `{"transaction_id":"t1","bogus":1}`, []httpkit.DecodeOption{httpkit.DisallowUnknownFields()}, "bogus", "bogus is not an accepted field"},
		{"bad time is a generic invalid value", `{"occurred_at":"yesterday"}`, nil, "", httpkit.MsgInvalidValue},
		{"array body", `[]`, nil, "", httpkit.MsgNotObject},
		{"malformed", `{"a":}`, nil, "", httpkit.MsgMalformedJSON},
		{"trailing data", `{} {}`, nil, "", httpkit.MsgTrailingData},
		{"not UTF-8", "{\"transaction_id\":\"t\xc3\"}", nil, "", httpkit.MsgNotUTF8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var dst saleBody
			err := httpkit.Decode(jsonRequest(tt.body, "application/json"), &dst, 0, tt.opts...)
			if tt.message == "" {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				return
			}
			wantDecodeError(t, err, http.StatusBadRequest, tt.message)
			var de *httpkit.DecodeError
			errors.As(err, &de)
			if de.Field != tt.field {
				t.Errorf("field = %q, want %q", de.Field, tt.field)
			}
		})
	}
}

func TestDecodeChecksMediaTypeAndSize(t *testing.T) {
	var dst saleBody
	err := httpkit.Decode(jsonRequest(`{}`, "text/plain"), &dst, 0)
	wantDecodeError(t, err, http.StatusBadRequest, httpkit.MsgUnsupportedMediaType)
	err = httpkit.Decode(jsonRequest(`{"transaction_id":"123456"}`, "application/json"), &dst, 10)
	wantDecodeError(t, err, http.StatusRequestEntityTooLarge, "Request body must not exceed 10 bytes")
}

// FuzzDecodeObject feeds arbitrary bodies through the decoder and every
// accessor: nothing may panic, and an accepted body must be valid JSON.
// decodeAll is every key and string of an accepted body, decoded.
func decodeAll(t *testing.T, body []byte) []string {
	t.Helper()
	if len(body) == 0 {
		return nil
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("accepted %q: %v", body, err)
	}
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			out = append(out, v)
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for k, e := range v {
				out = append(out, k)
				walk(e)
			}
		}
	}
	walk(v)
	return out
}

func FuzzDecodeObject(f *testing.F) {
	for _, seed := range []string{
		``, `{}`, `{"a":1}`, `{"affiliate_url":"https://x.test/?aff=1","program_id":"12"}`,
		`{"amount_cents":1e2,"livemode":true,"additional_data":{"test_mode":true}}`,
		`{"tags":["a",null,1]}`, `{"t":"2025-02-30T10:00:00Z"}`, `[1]`, `null`, `{"a":1}{}`,
		`{"a":"\ud800"}`, `{"a":-0}`, `{"a":9223372036854775808}`, `{"a":-9.223372036854775808e18}`,
		"{\"a\":\"\xff\"}", `{"a":{"b":{"c":[[[]]]}}}`, `{"":null}`,
		`{"a":"\u0000"}`, `{"a\u0000":1}`, `{"a":{"b":["\u0000"]}}`, `{"a":"\\u0000"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		obj, err := httpkit.DecodeObject(r, 4096)
		if err != nil {
			var de *httpkit.DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %v is not a *DecodeError", err)
			}
			return
		}
		trimmed := bytes.Trim(body, " \t\r\n")
		if len(trimmed) > 0 && !json.Valid(trimmed) {
			t.Fatalf("accepted invalid JSON %q", body)
		}
		if bytes.Contains(body, []byte{0}) || strings.Contains(fmt.Sprint(decodeAll(t, trimmed)), "\x00") {
			// Postgres text cannot hold U+0000: nothing accepted may carry it.
			t.Fatalf("accepted a NUL character in %q", body)
		}
		for _, k := range obj.Keys() {
			_, _, _ = obj.String(k)
			_, _, _ = obj.Int(k)
			_, _, _ = obj.Number(k)
			_, _, _ = obj.Bool(k)
			_, _, _ = obj.StringOrInt(k)
			_, _, _ = obj.StringSlice(k)
			_, _, _ = obj.Time(k)
			if sub, ok, err := obj.Object(k); ok && err == nil {
				_ = sub.Keys()
			}
		}
	})
}
