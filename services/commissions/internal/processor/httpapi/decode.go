package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/svc-dev/svc/libs/httpkit"
	"github.com/svc-dev/svc/services/commissions/internal/processor"
)

const (
	maxWebhookBody = 1 << 20
	maxEventID     = 255

	msgSignatureMissing = "Missing " + SignatureHeader + " header"
	msgSignatureInvalid = "Invalid " + SignatureHeader + ": the signature does not match the body, or its timestamp is more than 5 minutes away"
	msgEventPrefix      = "Invalid processor event: "

	// Bounds of a number in a stored event: well inside Postgres numeric
	// (131072 digits before the point, 16383 after), far beyond any real
	// amount or timestamp.
	maxNumberLength   = 400
	maxNumberExponent = 1000
)

func invalid(msg string) error {
	return &httpkit.DecodeError{Status: http.StatusBadRequest, Message: msg}
}

// envelope is the processor's event envelope.
type envelope struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Account  string `json:"account"`
	Created  int64  `json:"created"`
	Livemode *bool  `json:"livemode"`
	Data     struct {
		Object json.RawMessage `json:"object"`
	} `json:"data"`
}

func readBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxWebhookBody+1))
	if err != nil {
		return nil, invalid(processor.MsgEventInvalid)
	}
	if len(body) > maxWebhookBody {
		return nil, &httpkit.DecodeError{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("Request body must not exceed %d bytes", maxWebhookBody)}
	}
	return body, nil
}

// decodeEvent verifies the signature over the raw body, then reads the
// envelope. Every refusal is a 400 and stores nothing.
func decodeEvent(secrets []string, now func() time.Time) func(context.Context, *http.Request) (any, error) {
	return func(_ context.Context, r *http.Request) (any, error) {
		body, err := readBody(r)
		if err != nil {
			return nil, err
		}
		sig := r.Header.Get(SignatureHeader)
		if sig == "" {
			return nil, invalid(msgSignatureMissing)
		}
		at := now()
		if !verifySignature(secrets, sig, body, at) {
			return nil, invalid(msgSignatureInvalid)
		}
		var ev envelope
		if err := json.Unmarshal(body, &ev); err != nil || ev.ID == "" || ev.Type == "" || len(ev.Data.Object) == 0 || len(ev.ID) > maxEventID || len(ev.Type) > maxEventID || len(ev.Account) > maxEventID {
			return nil, invalid(processor.MsgEventInvalid)
		}
		// The raw event is stored as jsonb, which refuses what encoding/json
		// lets through; refused here, nothing is stored (see unstorable).
		var nul *httpkit.DecodeError
		if errors.As(httpkit.CheckNUL(body), &nul) {
			return nil, invalid(msgEventPrefix + nul.Message)
		}
		if msg := unstorable(body); msg != "" {
			return nil, invalid(msgEventPrefix + msg)
		}
		created := at.UTC()
		// The event's time, unless absent or ahead of ours (tracking refuses
		// a payment time in the future).
		if ev.Created > 0 && ev.Created <= at.Unix() {
			created = time.Unix(ev.Created, 0).UTC()
		}
		return processor.Event{
			ID: ev.ID, Type: ev.Type, AccountID: ev.Account, Livemode: ev.Livemode == nil || *ev.Livemode,
			Created: created, Object: ev.Data.Object, Payload: body,
		}, nil
	}
}

// unstorable says why the JSON text body, which encoding/json accepted,
// cannot be stored as jsonb, or "" when it can: invalid UTF-8 (encoding/json
// replaces it only in what it decodes, not in the raw text), a \u escape of
// an unpaired UTF-16 surrogate, or a number beyond numeric's range
// ("1e999999"). U+0000, the other value jsonb refuses, is httpkit.CheckNUL's.
// Each would otherwise fail the insert, a 500 the processor retries for days.
func unstorable(body []byte) string {
	if !utf8.Valid(body) {
		return "the body is not valid UTF-8"
	}
	inString := false
	for i := 0; i < len(body); i++ {
		c := body[i]
		if inString {
			switch {
			case c == '"':
				inString = false
			case c == '\\' && i+5 < len(body) && body[i+1] == 'u':
				r := hexRune(body[i+2 : i+6])
				switch {
				case r >= 0xD800 && r <= 0xDBFF:
					if i+11 >= len(body) || body[i+6] != '\\' || body[i+7] != 'u' {
						return msgSurrogate
					}
					if lo := hexRune(body[i+8 : i+12]); lo < 0xDC00 || lo > 0xDFFF {
						return msgSurrogate
					}
					i += 11
				case r >= 0xDC00 && r <= 0xDFFF:
					return msgSurrogate
				default:
					i += 5
				}
			case c == '\\':
				i++ // a one-character escape, \" and \\ included
			}
			continue
		}
		switch {
		case c == '"':
			inString = true
		case c == '-' || (c >= '0' && c <= '9'):
			j := i
			for j < len(body) && strings.IndexByte("+-.eE0123456789", body[j]) >= 0 {
				j++
			}
			if !numberFits(string(body[i:j])) {
				return fmt.Sprintf("numbers must be at most %d characters with an exponent of at most %d", maxNumberLength, maxNumberExponent)
			}
			i = j - 1
		}
	}
	return ""
}

const msgSurrogate = "a \\u escape names an unpaired UTF-16 surrogate"

func hexRune(b []byte) rune {
	n, err := strconv.ParseUint(string(b), 16, 32)
	if err != nil {
		return -1
	}
	return rune(n)
}

func numberFits(lit string) bool {
	if len(lit) > maxNumberLength {
		return false
	}
	k := strings.IndexAny(lit, "eE")
	if k < 0 {
		return true
	}
	exp, err := strconv.Atoi(lit[k+1:])
	return err == nil && exp >= -maxNumberExponent && exp <= maxNumberExponent
}
