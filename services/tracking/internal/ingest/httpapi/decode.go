package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/svc-dev/svc/libs/auth/apikey"
	"github.com/svc-dev/svc/libs/errkind"
	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/tracking/internal/ingest"
)

// Field limits: long enough for real pages (URLs with campaign parameters),
// short enough that a row stays small.
const (
	maxURLLength  = 2048
	maxTextLength = 255
)

var dimensionRe = regexp.MustCompile(`^[0-9]{1,5}x[0-9]{1,5}$`)

func invalid(msg string) error { return &ingest.Error{Kind: errkind.Invalid, Message: msg} }

// fields reads optional values, keeping the first problem.
type fields struct {
	obj httpkit.Object
	err error
}

func (f *fields) keep(err error) {
	if f.err != nil || err == nil {
		return
	}
	var fe *httpkit.FieldError
	if errors.As(err, &fe) {
		err = invalid(fe.Error())
	}
	f.err = err
}

// text reads an optional string of at most max characters.
func (f *fields) text(key string, max int) string {
	v, ok, err := f.obj.String(key)
	f.keep(err)
	if !ok || err != nil {
		return ""
	}
	if len(v) > max {
		f.keep(invalid(fmt.Sprintf("%s must be at most %d characters", key, max)))
		return ""
	}
	return v
}

// descriptive reads one of a click's optional descriptive fields: only a
// wrong JSON type refuses the click (the spec refuses a click only for the
// rows of its table); a value too long is stored cut to max characters
// (never inside a character), and bytes that are not UTF-8 (a header's)
// become U+FFFD, so a long page title in any script never costs the click,
// its cookie and its attribution.
func (f *fields) descriptive(key string, max int) string {
	v, ok, err := f.obj.String(key)
	f.keep(err)
	if !ok || err != nil {
		return ""
	}
	return clean(v, max)
}

// dimension is a descriptive <width>x<height>; any other value is dropped.
func (f *fields) dimension(key string) string {
	v := f.descriptive(key, 11)
	if !dimensionRe.MatchString(v) {
		return ""
	}
	return v
}

// clean makes s storable: invalid UTF-8 replaced, at most max characters.
func clean(s string, max int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	n := 0
	for i := range s {
		if n == max {
			return s[:i]
		}
		n++
	}
	return s
}

// programRef reads a program id sent as an integer or a numeric string.
func programRef(obj httpkit.Object, key string) ingest.ProgramRef {
	if !obj.Has(key) || obj.IsNull(key) {
		return ingest.ProgramRef{}
	}
	id, _, err := obj.StringOrInt(key)
	return ingest.ProgramRef{Sent: true, Valid: err == nil && id > 0, ID: id}
}

// additional reads additional_data: test_mode, program_id and event_name.
type additional struct {
	testMode  bool
	programID int64
	eventName string
}

func (f *fields) additional() additional {
	var a additional
	obj, ok, err := f.obj.Object("additional_data")
	if err != nil {
		f.keep(invalid("additional_data must be an object"))
		return a
	}
	if !ok {
		return a
	}
	sub := &fields{obj: obj}
	if v, ok, err := obj.Bool("test_mode"); err != nil {
		f.keep(invalid("additional_data.test_mode must be a boolean"))
	} else if ok {
		a.testMode = v
	}
	if v, ok, err := obj.Int("program_id"); err != nil || (ok && v <= 0) {
		f.keep(invalid("additional_data.program_id must be a positive integer"))
	} else if ok {
		a.programID = v
	}
	a.eventName = sub.text("event_name", maxTextLength)
	if sub.err != nil {
		f.keep(invalid("additional_data.event_name must be a string of at most 255 characters"))
	}
	return a
}

// specMessages gives a NUL refusal (httpkit.CheckNUL, through DecodeObject)
// the route's own message for the field where the specification has one
// that holds for any unusable value of it ("Invalid affiliate_url"); other
// fields keep the generic "<field> must not contain the NUL character".
func specMessages(err error, msgs map[string]string) error {
	var de *httpkit.DecodeError
	if errors.As(err, &de) && de.Field != "" {
		if m, ok := msgs[de.Field]; ok {
			return invalid(m)
		}
	}
	return err
}

// clickMessages are the click route's field messages a NUL takes.
var clickMessages = map[string]string{
	"affiliate_url":              ingest.MsgInvalidAffiliateURL,
	"additional_data.test_mode":  "additional_data.test_mode must be a boolean",
	"additional_data.program_id": "additional_data.program_id must be a positive integer",
}

// requestKey is the program key the auth middleware recognised, if any.
func requestKey(ctx context.Context, now time.Time) *ingest.Key {
	k, ok := apikey.KeyFrom(ctx)
	if !ok {
		return nil
	}
	return &ingest.Key{ID: k.ID, ProgramID: k.ProgramID, Usable: !k.Retired(now), Test: k.Test}
}

func clientIP(r *http.Request) netip.Addr {
	ip, _ := httpkit.ClientIPFrom(r.Context())
	return ip
}

func decodeClick(now func() time.Time) func(context.Context, *http.Request) (any, error) {
	return func(ctx context.Context, r *http.Request) (any, error) {
		obj, err := httpkit.DecodeObject(r, 0)
		if err != nil {
			return nil, specMessages(err, clickMessages)
		}
		f := &fields{obj: obj}
		in := ingest.ClickInput{ClientIP: clientIP(r), Origin: r.Header.Get("Origin"), Key: requestKey(ctx, now())}
		if _, ok := obj.Raw("affiliate_url"); ok {
			// Present but not a string cannot be parsed as a URL.
			in.AffiliateURLSent = true
			v, _, err := obj.String("affiliate_url")
			if err != nil {
				return nil, invalid(ingest.MsgInvalidAffiliateURL)
			}
			if len(v) > maxURLLength {
				// It may parse: the table's message would be wrong.
				return nil, invalid(fmt.Sprintf("affiliate_url must be at most %d bytes", maxURLLength))
			}
			in.AffiliateURL = v
		}
		in.Details = ingest.ClickDetails{
			PageURL:          f.descriptive("page_url", maxURLLength),
			PageTitle:        f.descriptive("page_title", maxTextLength),
			ReferrerURL:      f.descriptive("referrer_url", maxURLLength),
			SessionID:        f.descriptive("session_id", maxTextLength),
			ScreenResolution: f.dimension("screen_resolution"),
			ViewportSize:     f.dimension("viewport_size"),
			Language:         f.descriptive("language", 35),
			Timezone:         f.descriptive("timezone", 64),
		}
		in.UserAgent = f.descriptive("user_agent", maxURLLength)
		if in.UserAgent == "" {
			// The header is whatever the client sent, UTF-8 or not.
			in.UserAgent = clean(r.UserAgent(), maxURLLength)
		}
		in.ExistingClickID = f.text("existing_click_id", maxTextLength)
		in.VisitorIP = f.descriptive("visitor_ip", 64)
		in.Program = programRef(obj, "program_id")
		a := f.additional()
		in.TestMode, in.TestProgramID = a.testMode, a.programID
		return in, f.err
	}
}

func decodeLead(now func() time.Time) func(context.Context, *http.Request) (any, error) {
	return func(ctx context.Context, r *http.Request) (any, error) {
		obj, err := httpkit.DecodeObject(r, 0)
		if err != nil {
			return nil, err
		}
		f := &fields{obj: obj}
		in := ingest.LeadInput{
			Key:         requestKey(ctx, now()),
			ClickID:     f.text("click_id", maxTextLength),
			CustomerKey: f.text("customer_key", maxTextLength),
			Email:       f.text("email", 254),
			Program:     programRef(obj, "program_id"),
			Origin:      r.Header.Get("Origin"),
		}
		a := f.additional()
		in.TestMode, in.TestProgramID, in.EventName = a.testMode, a.programID, a.eventName
		return in, f.err
	}
}

func decodeVisit(_ context.Context, r *http.Request) (any, error) {
	obj, err := httpkit.DecodeObject(r, 0)
	if err != nil {
		return nil, specMessages(err, map[string]string{"page_url": ingest.MsgPageURLRequired})
	}
	f := &fields{obj: obj}
	in := ingest.VisitInput{
		Program:     programRef(obj, "program_id"),
		PageURL:     f.text("page_url", maxURLLength),
		ClickID:     f.text("click_id", maxTextLength),
		ReferrerURL: f.text("referrer_url", maxURLLength),
		SessionID:   f.text("session_id", maxTextLength),
		ClientIP:    clientIP(r),
		Origin:      r.Header.Get("Origin"),
	}
	return in, f.err
}

func decodeConfig(_ context.Context, r *http.Request) (any, error) {
	raw := r.URL.Query().Get("program_id")
	if raw == "" {
		return ingest.ProgramRef{}, nil
	}
	id, err := strconv.ParseInt(raw, 10, 64)
	return ingest.ProgramRef{Sent: true, Valid: err == nil && id > 0, ID: id}, nil
}
