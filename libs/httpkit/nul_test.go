package httpkit_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/svc-dev/svc/libs/httpkit"
)

// nulCases are bodies with U+0000 in a string and the field the refusal
// names: Postgres text and jsonb cannot hold it, so it is a 400 at the edge.
var nulCases = []struct {
	name, body, field, message string
}{
	{"top-level value", `{"page_url":"https://a.example/\u0000"}`, "page_url", "page_url must not contain the NUL character"},
	{"only a NUL", `{"state":"\u0000"}`, "state", "state must not contain the NUL character"},
	{"nested value", `{"additional_data":{"event_name":"a\u0000b"}}`, "additional_data.event_name", "additional_data.event_name must not contain the NUL character"},
	{"deeply nested", `{"data":{"object":{"metadata":{"svc_click_id":"c\u0000"}}}}`, "data.object.metadata.svc_click_id", "data.object.metadata.svc_click_id must not contain the NUL character"},
	{"array element", `{"allowed_origins":["https://a.example","https://b\u0000"]}`, "allowed_origins[1]", "allowed_origins[1] must not contain the NUL character"},
	{"object in array", `{"items":[1,{"name":"\u0000"}]}`, "items[1].name", "items[1].name must not contain the NUL character"},
	{"top-level key", `{"a\u0000":"x"}`, "", httpkit.MsgNULFieldNames},
	{"nested key", `{"additional_data":{"\u0000":1}}`, "additional_data", "additional_data must not contain the NUL character"},
	{"after other fields and numbers", `{"n":1e400,"b":true,"z":null,"s":"ok","t":"\u0000"}`, "t", "t must not contain the NUL character"},
}

func wantNUL(t *testing.T, err error, field, message string) {
	t.Helper()
	wantDecodeError(t, err, http.StatusBadRequest, message)
	var de *httpkit.DecodeError
	if errors.As(err, &de) && de.Field != field {
		t.Errorf("field = %q, want %q", de.Field, field)
	}
}

func TestDecodeObjectRefusesNUL(t *testing.T) {
	for _, tc := range nulCases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := httpkit.DecodeObject(jsonRequest(tc.body, "application/json"), 0)
			wantNUL(t, err, tc.field, tc.message)
		})
	}
}

func TestDecodeRefusesNUL(t *testing.T) {
	for _, tc := range nulCases {
		t.Run(tc.name, func(t *testing.T) {
			var dst map[string]any
			err := httpkit.Decode(jsonRequest(tc.body, "application/json"), &dst, 0)
			wantNUL(t, err, tc.field, tc.message)
		})
	}
}

// Text that only looks like a NUL escape, and other control characters,
// are accepted; a lone surrogate escape is replaced by U+FFFD (encoding/json),
// so it never reaches the database as such. (Raw bytes that are not UTF-8 are
// refused: decode_test.go.)
func TestDecodeObjectAcceptsWhatIsNotNUL(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"escaped backslash before u0000", `{"s":"a\\u0000"}`, `a\u0000`},
		{"other control character", `{"s":"a\u0001"}`, "a\x01"},
		{"U+0100", `{"s":"\u0100"}`, "\u0100"},
		{"lone surrogate is replaced", `{"s":"\ud800"}`, "\uFFFD"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj, err := httpkit.DecodeObject(jsonRequest(tc.body, "application/json"), 0)
			if err != nil {
				t.Fatal(err)
			}
			if got, _, err := obj.String("s"); err != nil || got != tc.want {
				t.Fatalf("String = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestCheckNULLeavesMalformedJSONToTheParser(t *testing.T) {
	for _, body := range []string{`{"a":"\u0000`, `{"a":[1,}`, `\u0000`, ``} {
		if err := httpkit.CheckNUL([]byte(body)); err != nil {
			t.Errorf("CheckNUL(%q) = %v, want nil", body, err)
		}
	}
	if err := httpkit.CheckNUL([]byte(`["\u0000"]`)); err == nil {
		t.Error(`CheckNUL(["\u0000"]) = nil, want a refusal`)
	}
}

// Accessors refuse NUL too, for an Object not made by DecodeObject.
func TestObjectAccessorsRefuseNUL(t *testing.T) {
	obj := httpkit.Object{
		"s":   []byte(`"a\u0000"`),
		"l":   []byte(`["ok","\u0000"]`),
		"o":   []byte(`{"k":"\u0000"}`),
		"t":   []byte(`"2025-05-01T10:00:00Z\u0000"`),
		"ok":  []byte(`"fine"`),
		"nil": []byte(`null`),
	}
	check := func(name string, err error, want string) {
		t.Helper()
		var fe *httpkit.FieldError
		if !errors.As(err, &fe) || fe.Error() != want || httpkit.KindStatus(err) != http.StatusBadRequest {
			t.Errorf("%s: err = %v, want %q", name, err, want)
		}
	}
	_, _, err := obj.String("s")
	check("String", err, "s must not contain the NUL character")
	_, _, err = obj.StringSlice("l")
	check("StringSlice", err, "l must not contain the NUL character")
	_, _, err = obj.Object("o")
	check("Object", err, "o.k must not contain the NUL character")
	_, _, err = obj.Time("t")
	check("Time", err, "t must be an RFC 3339 time")
	if v, ok, err := obj.String("ok"); v != "fine" || !ok || err != nil {
		t.Errorf("String(ok) = %q, %v, %v", v, ok, err)
	}
}

func TestCheckValuesNUL(t *testing.T) {
	for _, tc := range []struct{ name, query, field, message string }{
		{"value", "state=abc%00&x=1", "state", "state must not contain the NUL character"},
		{"second value of a name", "email=a%40b.example&email=%00", "email", "email must not contain the NUL character"},
		{"name", "a%00=1", "", "Parameter names must not contain the NUL character"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			wantNUL(t, httpkit.CheckValuesNUL(q), tc.field, tc.message)
		})
	}
	if err := httpkit.CheckValuesNUL(url.Values{"state": {"abc"}, "e": {""}}); err != nil {
		t.Fatalf("clean values refused: %v", err)
	}
}

func TestRefuseNULQuery(t *testing.T) {
	called := false
	dec := httpkit.RefuseNULQuery(func(context.Context, *http.Request) (any, error) { called = true; return "ok", nil })
	_, err := dec(context.Background(), httptest.NewRequest(http.MethodGet, "/x?email=a%00b", nil))
	wantNUL(t, err, "email", "email must not contain the NUL character")
	if called {
		t.Fatal("the decoder ran on a refused query")
	}
	if v, err := dec(context.Background(), httptest.NewRequest(http.MethodGet, "/x?email=a%40b", nil)); err != nil || v != "ok" || !called {
		t.Fatalf("clean query: %v, %v, called %v", v, err, called)
	}
}
