// Package seed loads demo catalog data through the accounts admin API, the
// same way an operator would, creating only what is missing, and waits on
// the catalog sync barrier so the data is usable by every service when it
// returns.
package seed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/svc-dev/svc/libs/auth/apikey"
)

// Demo is the seed file's shape: one of each catalog entity, and the demo
// program's keys.
type Demo struct {
	Advertiser map[string]any `json:"advertiser"`
	User       map[string]any `json:"user"`
	Program    map[string]any `json:"program"`
	Member     map[string]any `json:"member"`
	Partner    map[string]any `json:"partner"`
	Enrolment  map[string]any `json:"partner_program"`
	Link       map[string]any `json:"link"`
	// ProcessorAccount is the processor account the demo program is
	// connected to, so the processor's events for it (signed by hand
	// locally) select the program; "" leaves the connection alone. Set by
	// PATCH, the only route that changes a connection.
	ProcessorAccount string `json:"processor_account"`
	// Keys have fixed values (imported, not generated) so that a seed run
	// after the local state is gone, or from a second clone, finds the
	// same keys and prints them again: only their hashes are stored.
	Keys []DemoKey `json:"keys"`
}

// DemoKey is one fixed demo key.
type DemoKey struct {
	Key  string `json:"key"`
	Test bool   `json:"test"`
}

// Result is what the seed found or created.
type Result struct {
	AdvertiserID int64  `json:"advertiser_id"`
	UserID       int64  `json:"user_id"`
	ProgramID    int64  `json:"program_id"`
	PartnerID    int64  `json:"partner_id"`
	LinkID       int64  `json:"link_id"`
	LinkCode     string `json:"link_code"`
	// Keys are the demo keys in the seed file's order, with their ids.
	Keys           []IssuedKey `json:"keys"`
	AllowedOrigins []string    `json:"allowed_origins"`
	// Created counts the entities this run created or changed (0 when the
	// whole demo catalog was already there).
	Created    int   `json:"created"`
	CatalogSeq int64 `json:"catalog_seq"`

	newMembership bool
}

// IssuedKey is a demo key with its id.
type IssuedKey struct {
	ID   int64  `json:"id"`
	Key  string `json:"key"`
	Test bool   `json:"test"`
}

// Key returns the first demo key of the kind asked for, if any.
func (r Result) Key(test bool) (IssuedKey, bool) {
	for _, k := range r.Keys {
		if k.Test == test {
			return k, true
		}
	}
	return IssuedKey{}, false
}

// Load reads a seed file.
func Load(path string) (Demo, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Demo{}, fmt.Errorf("read seed file: %w", err)
	}
	var d Demo
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return Demo{}, fmt.Errorf("parse seed file %s: %w", path, err)
	}
	if d.User == nil || d.Advertiser == nil || d.Program == nil || d.Partner == nil || d.Link == nil {
		return Demo{}, fmt.Errorf("seed file %s needs advertiser, user, program, partner and link", path)
	}
	for _, k := range [...]struct {
		m    map[string]any
		name string
	}{{d.User, "user.email"}, {d.Partner, "partner.email"}, {d.Program, "program.name"}, {d.Link, "link.code"}} {
		field := k.name[strings.IndexByte(k.name, '.')+1:]
		if v, _ := k.m[field].(string); v == "" {
			return Demo{}, fmt.Errorf("seed file %s: %s is required (the seed finds what exists by it)", path, k.name)
		}
	}
	return d, nil
}

// Error is an admin API answer other than 2xx.
type Error struct {
	Method, Path string
	Status       int
	Body         string
	Details      map[string]any
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s %s: %d %s", e.Method, e.Path, e.Status, e.Body)
}

func statusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// Client calls the admin API. It is safe for concurrent use.
type Client struct {
	BaseURL    string
	AdminToken string
	HTTP       *http.Client
	seq        atomic.Int64
}

// Call sends body to method path and decodes data into out. It remembers the
// highest X-Catalog-Seq seen.
func (c *Client) Call(ctx context.Context, method, path string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.AdminToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read body: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		e := &Error{Method: method, Path: path, Status: resp.StatusCode, Body: string(bytes.TrimSpace(raw))}
		var env struct {
			Error struct {
				Details map[string]any `json:"details"`
			} `json:"error"`
		}
		if json.Unmarshal(raw, &env) == nil {
			e.Details = env.Error.Details
		}
		return e
	}
	if s := resp.Header.Get("X-Catalog-Seq"); s != "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			for cur := c.seq.Load(); n > cur && !c.seq.CompareAndSwap(cur, n); cur = c.seq.Load() {
			}
		}
	}
	if out == nil {
		return nil
	}
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		return fmt.Errorf("%s %s: decode: %w", method, path, err)
	}
	return json.Unmarshal(env.Data, out)
}

// Sync waits until every catalog consumer applied everything this client
// wrote.
func (c *Client) Sync(ctx context.Context, timeout time.Duration) error {
	return c.Call(ctx, http.MethodGet, fmt.Sprintf("/admin/v1/catalog/sync?seq=%d&timeout=%s", c.seq.Load(), timeout), nil, nil)
}

// Seq is the highest catalog sequence this client's writes produced.
func (c *Client) Seq() int64 { return c.seq.Load() }

type idOnly struct {
	ID int64 `json:"id"`
}

func with(m map[string]any, k string, v any) map[string]any {
	out := map[string]any{}
	for kk, vv := range m {
		out[kk] = vv
	}
	out[k] = v
	return out
}

// Run finds the demo catalog's entities by their natural keys (the user's
// and partner's email, the program's name within the advertiser, the link
// code, the key values) and creates only what is missing, so it can run on
// every start of the stack, after the local state is deleted and from a
// second clone against the same database, and always ends with the same
// program and keys. A program that exists gets the seed file's settings
// where they differ (new allowed origins reach an old demo program). It
// waits for what it wrote to reach every consumer.
func Run(ctx context.Context, c *Client, d Demo) (Result, error) {
	r := Result{LinkCode: d.Link["code"].(string)}
	steps := []func(context.Context, *Client, Demo, *Result) error{
		ensureUser, ensureProgram, ensureMember, ensurePartner, ensureEnrolment, ensureLink, ensureKeys,
	}
	for _, step := range steps {
		if err := step(ctx, c, d, &r); err != nil {
			return r, err
		}
	}
	if c.Seq() > 0 {
		if err := c.Sync(ctx, 30*time.Second); err != nil {
			return r, fmt.Errorf("wait for the catalog to reach every service: %w", err)
		}
	}
	r.CatalogSeq = c.Seq()
	return r, nil
}

// ensureUser finds the demo user by email, or creates the advertiser and
// the user.
func ensureUser(ctx context.Context, c *Client, d Demo, r *Result) error {
	email := d.User["email"].(string)
	var u struct {
		ID           int64  `json:"id"`
		AdvertiserID *int64 `json:"advertiser_id"`
	}
	err := c.Call(ctx, "GET", "/admin/v1/users?email="+url.QueryEscape(email), nil, &u)
	switch {
	case err == nil:
		if u.AdvertiserID == nil {
			return fmt.Errorf("user %s exists but belongs to no advertiser: give it one or change user.email in the seed file", email)
		}
		r.UserID, r.AdvertiserID = u.ID, *u.AdvertiserID
		return nil
	case statusOf(err) != http.StatusNotFound:
		return err
	}
	var id idOnly
	if err := c.Call(ctx, "POST", "/admin/v1/advertisers", d.Advertiser, &id); err != nil {
		return err
	}
	r.AdvertiserID = id.ID
	if err := c.Call(ctx, "POST", "/admin/v1/users", with(d.User, "advertiser_id", r.AdvertiserID), &id); err != nil {
		return err
	}
	r.UserID = id.ID
	r.Created += 2
	r.newMembership = true
	return nil
}

// ensureProgram finds the advertiser's demo program (demoProgram), or
// creates it, and brings its settings to the seed file's.
func ensureProgram(ctx context.Context, c *Client, d Demo, r *Result) error {
	var programs []map[string]any
	if err := c.Call(ctx, "GET", fmt.Sprintf("/admin/v1/programs?advertiser_id=%d", r.AdvertiserID), nil, &programs); err != nil {
		return err
	}
	demo, renamed, err := demoProgram(ctx, c, d, programs)
	if err != nil {
		return err
	}
	if demo != nil {
		p := demo
		id, _ := p["id"].(float64)
		r.ProgramID = int64(id)
		r.AllowedOrigins = strs(p["allowed_origins"])
		changed := differing(d.Program, p)
		if renamed {
			// The brand's own name for it stays.
			delete(changed, "name")
		}
		if pc, _ := p["processor_connection"].(map[string]any); d.ProcessorAccount != "" && (pc["status"] != "connected" || pc["account_id"] != d.ProcessorAccount) {
			changed["processor_connection"] = connection(d.ProcessorAccount)
		}
		if len(changed) > 0 {
			if err := c.Call(ctx, "PATCH", fmt.Sprintf("/admin/v1/programs/%d", r.ProgramID), changed, nil); err != nil {
				return err
			}
			r.Created++
			if v, ok := changed["allowed_origins"]; ok {
				r.AllowedOrigins = strs(v)
			}
		}
		return nil
	}
	var id idOnly
	if err := c.Call(ctx, "POST", "/admin/v1/programs", with(d.Program, "advertiser_id", r.AdvertiserID), &id); err != nil {
		return err
	}
	r.ProgramID = id.ID
	r.AllowedOrigins = strs(d.Program["allowed_origins"])
	r.Created++
	r.newMembership = true
	if d.ProcessorAccount != "" {
		return c.Call(ctx, "PATCH", fmt.Sprintf("/admin/v1/programs/%d", r.ProgramID), map[string]any{"processor_connection": connection(d.ProcessorAccount)}, nil)
	}
	return nil
}

// demoProgram is the advertiser's program holding the demo keys (renamed
// is true when it no longer has the seed file's name: the brand renamed it
// in the console, say) or, before the keys exist, the one named as in the
// seed file, or nil. A key is recognised by its display prefix, the part
// the admin API shows.
func demoProgram(ctx context.Context, c *Client, d Demo, programs []map[string]any) (demo map[string]any, renamed bool, err error) {
	prefixes := map[string]bool{}
	for _, k := range d.Keys {
		if len(k.Key) >= apikey.PrefixLen {
			prefixes[k.Key[:apikey.PrefixLen]] = true
		}
	}
	for _, p := range programs {
		if len(prefixes) == 0 {
			break
		}
		id, _ := p["id"].(float64)
		var keys []struct {
			Prefix string `json:"prefix"`
		}
		if err := c.Call(ctx, "GET", fmt.Sprintf("/admin/v1/programs/%d/keys", int64(id)), nil, &keys); err != nil {
			return nil, false, err
		}
		for _, k := range keys {
			if prefixes[k.Prefix] {
				return p, p["name"] != d.Program["name"], nil
			}
		}
	}
	for _, p := range programs {
		if p["name"] == d.Program["name"] {
			return p, false, nil
		}
	}
	return nil, false, nil
}

// connection is the demo's processor connection: connected, able to take
// charges and pay out.
func connection(account string) map[string]any {
	return map[string]any{"status": "connected", "account_id": account, "charges_enabled": true, "payouts_enabled": true, "details_submitted": true}
}

// ensureMember puts the demo user's membership when the user or the
// program is new. The route replaces an existing membership and nothing
// reads one back, so an existing pair is left as it is (an operator may
// have changed its permissions).
func ensureMember(ctx context.Context, c *Client, d Demo, r *Result) error {
	if d.Member == nil || !r.newMembership {
		return nil
	}
	r.Created++
	return c.Call(ctx, "POST", fmt.Sprintf("/admin/v1/programs/%d/members", r.ProgramID), with(d.Member, "user_id", r.UserID), nil)
}

func ensurePartner(ctx context.Context, c *Client, d Demo, r *Result) error {
	var partners []idOnly
	email := d.Partner["email"].(string)
	if err := c.Call(ctx, "GET", "/admin/v1/partners?email="+url.QueryEscape(email), nil, &partners); err != nil {
		return err
	}
	if len(partners) > 0 {
		r.PartnerID = partners[0].ID
		return nil
	}
	var id idOnly
	if err := c.Call(ctx, "POST", "/admin/v1/partners", d.Partner, &id); err != nil {
		return err
	}
	r.PartnerID = id.ID
	r.Created++
	return nil
}

// ensureEnrolment enrols the partner; 409 means it already is.
func ensureEnrolment(ctx context.Context, c *Client, d Demo, r *Result) error {
	enrol := d.Enrolment
	if enrol == nil {
		enrol = map[string]any{"approved": true}
	}
	err := c.Call(ctx, "POST", fmt.Sprintf("/admin/v1/programs/%d/partners", r.ProgramID), with(enrol, "partner_id", r.PartnerID), nil)
	if statusOf(err) == http.StatusConflict {
		return nil
	}
	if err == nil {
		r.Created++
	}
	return err
}

func ensureLink(ctx context.Context, c *Client, d Demo, r *Result) error {
	var links []idOnly
	if err := c.Call(ctx, "GET", fmt.Sprintf("/admin/v1/programs/%d/links?code=%s", r.ProgramID, url.QueryEscape(r.LinkCode)), nil, &links); err != nil {
		return err
	}
	if len(links) > 0 {
		r.LinkID = links[0].ID
		return nil
	}
	var id idOnly
	if err := c.Call(ctx, "POST", fmt.Sprintf("/admin/v1/programs/%d/links", r.ProgramID), with(d.Link, "partner_id", r.PartnerID), &id); err != nil {
		return err
	}
	r.LinkID = id.ID
	r.Created++
	return nil
}

// ensureKeys imports each fixed demo key; 409 names the stored key, which
// must be this program's.
func ensureKeys(ctx context.Context, c *Client, d Demo, r *Result) error {
	for _, k := range d.Keys {
		var key IssuedKey
		err := c.Call(ctx, "POST", fmt.Sprintf("/admin/v1/programs/%d/keys", r.ProgramID), map[string]any{"key": k.Key, "test": k.Test}, &key)
		var e *Error
		switch {
		case err == nil:
			r.Created++
		case errors.As(err, &e) && e.Status == http.StatusConflict:
			id, _ := e.Details["key_id"].(float64)
			program, _ := e.Details["program_id"].(float64)
			if int64(program) != r.ProgramID {
				return fmt.Errorf("demo key %s… is stored for program %d, not the demo program %d", k.Key[:13], int64(program), r.ProgramID)
			}
			key.ID = int64(id)
		default:
			return err
		}
		r.Keys = append(r.Keys, IssuedKey{ID: key.ID, Key: k.Key, Test: k.Test})
	}
	return nil
}

// differing returns the seed's program fields whose values the existing
// program does not have (compared as JSON values).
func differing(want, have map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range want {
		if k == "advertiser_id" {
			continue
		}
		if !sameJSON(v, have[k]) {
			out[k] = v
		}
	}
	return out
}

func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	if err1 != nil || err2 != nil {
		return false
	}
	var xa, yb any
	_ = json.Unmarshal(x, &xa)
	_ = json.Unmarshal(y, &yb)
	return reflect.DeepEqual(xa, yb)
}

func strs(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, s := range list {
		if str, ok := s.(string); ok {
			out = append(out, str)
		}
	}
	return out
}
