// Package seed loads demo catalog data through the accounts admin API, the
// same way an operator would, and waits on the catalog sync barrier so the
// data is usable by every service when it returns.
package seed

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"
)

// Demo is the seed file's shape: one of each catalog entity.
type Demo struct {
	Advertiser map[string]any `json:"advertiser"`
	User       map[string]any `json:"user"`
	Program    map[string]any `json:"program"`
	Member     map[string]any `json:"member"`
	Partner    map[string]any `json:"partner"`
	Enrolment  map[string]any `json:"partner_program"`
	Link       map[string]any `json:"link"`
	Key        map[string]any `json:"key"`
}

// Result is what the seed created.
type Result struct {
	AdvertiserID int64  `json:"advertiser_id"`
	UserID       int64  `json:"user_id"`
	ProgramID    int64  `json:"program_id"`
	PartnerID    int64  `json:"partner_id"`
	LinkID       int64  `json:"link_id"`
	LinkCode     string `json:"link_code"`
	KeyID        int64  `json:"key_id"`
	Key          string `json:"key"`
	CatalogSeq   int64  `json:"catalog_seq"`
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
	if d.Advertiser == nil || d.Program == nil || d.Partner == nil || d.Link == nil {
		return Demo{}, fmt.Errorf("seed file %s needs advertiser, program, partner and link", path)
	}
	return d, nil
}

// Client calls the admin API.
type Client struct {
	BaseURL    string
	AdminToken string
	HTTP       *http.Client
	seq        int64
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
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, bytes.TrimSpace(raw))
	}
	if s := resp.Header.Get("X-Catalog-Seq"); s != "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil && n > c.seq {
			c.seq = n
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
	return c.Call(ctx, http.MethodGet, fmt.Sprintf("/admin/v1/catalog/sync?seq=%d&timeout=%s", c.seq, timeout), nil, nil)
}

// Seq is the highest catalog sequence this client's writes produced.
func (c *Client) Seq() int64 { return c.seq }

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

// Run creates the demo catalog and waits for it to reach every consumer.
func Run(ctx context.Context, c *Client, d Demo) (Result, error) {
	var r Result
	var id idOnly
	if err := c.Call(ctx, "POST", "/admin/v1/advertisers", d.Advertiser, &id); err != nil {
		return r, err
	}
	r.AdvertiserID = id.ID
	if d.User != nil {
		if err := c.Call(ctx, "POST", "/admin/v1/users", with(d.User, "advertiser_id", r.AdvertiserID), &id); err != nil {
			return r, err
		}
		r.UserID = id.ID
	}
	if err := c.Call(ctx, "POST", "/admin/v1/programs", with(d.Program, "advertiser_id", r.AdvertiserID), &id); err != nil {
		return r, err
	}
	r.ProgramID = id.ID
	pp := fmt.Sprintf("/admin/v1/programs/%d", r.ProgramID)
	if d.Member != nil && r.UserID != 0 {
		if err := c.Call(ctx, "POST", pp+"/members", with(d.Member, "user_id", r.UserID), nil); err != nil {
			return r, err
		}
	}
	if err := c.Call(ctx, "POST", "/admin/v1/partners", d.Partner, &id); err != nil {
		return r, err
	}
	r.PartnerID = id.ID
	enrol := d.Enrolment
	if enrol == nil {
		enrol = map[string]any{"approved": true}
	}
	if err := c.Call(ctx, "POST", pp+"/partners", with(enrol, "partner_id", r.PartnerID), nil); err != nil {
		return r, err
	}
	if err := c.Call(ctx, "POST", pp+"/links", with(d.Link, "partner_id", r.PartnerID), &id); err != nil {
		return r, err
	}
	r.LinkID = id.ID
	r.LinkCode, _ = d.Link["code"].(string)
	keyBody := d.Key
	if keyBody == nil {
		keyBody = map[string]any{"test": true}
	}
	var key struct {
		ID  int64  `json:"id"`
		Key string `json:"key"`
	}
	if err := c.Call(ctx, "POST", pp+"/keys", keyBody, &key); err != nil {
		return r, err
	}
	r.KeyID, r.Key = key.ID, key.Key
	if err := c.Sync(ctx, 30*time.Second); err != nil {
		return r, fmt.Errorf("wait for the catalog to reach every service: %w", err)
	}
	r.CatalogSeq = c.Seq()
	return r, nil
}
