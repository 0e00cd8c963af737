package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/svc-dev/svc/cli/app"
	"github.com/svc-dev/svc/deploy/devstack/gateway"
	"github.com/svc-dev/svc/deploy/devstack/stack/stacktest"
)

// syncBuffer is a bytes.Buffer safe to read while the CLI writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// received is one request the local server got.
type received struct {
	header http.Header
	body   []byte
}

var readyLine = regexp.MustCompile(`Ready: forwarding program (\d+) events to (\S+)\. Signing secret: (whsec_\S+) \(this session only\)`)

// svc listen on the whole stack behind the local gateway: the program's
// key starts a listener, a live sale through the gateway reaches a real
// local server as sale.created, its webhook-signature verifies with the
// Standard Webhooks Go library under the secret the CLI printed, and
// Ctrl-C stops the listener and exits 0.
func TestListenForwardsSignedEvents(t *testing.T) {
	st := stacktest.Start(t, map[string]string{"CLI_RATE_LIMIT": "100000"})
	gw := httptest.NewServer(gateway.New(st.Handlers()))
	t.Cleanup(gw.Close)
	var catalogSeq int64
	admin := func(method, path string, body any) map[string]any {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, gw.URL+path, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+stacktest.AdminToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 300 {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
		}
		if n, err := strconv.ParseInt(resp.Header.Get("X-Catalog-Seq"), 10, 64); err == nil && n > catalogSeq {
			catalogSeq = n
		}
		var out struct {
			Data map[string]any `json:"data"`
		}
		_ = json.Unmarshal(raw, &out)
		return out.Data
	}
	id := func(m map[string]any) int64 { return int64(m["id"].(float64)) }
	adv := id(admin("POST", "/admin/v1/advertisers", map[string]any{"name": "Listen", "email": "listen@brand.example"}))
	prog := id(admin("POST", "/admin/v1/programs", map[string]any{"advertiser_id": adv, "name": "Listen", "domain": "listen.example",
		"commission_type": "percent", "commission_rate": 10}))
	key, _ := admin("POST", fmt.Sprintf("/admin/v1/programs/%d/keys", prog), map[string]any{"test": false})["key"].(string)
	partner := id(admin("POST", "/admin/v1/partners", map[string]any{"name": "P", "email": "p@listen-partners.example"}))
	admin("POST", fmt.Sprintf("/admin/v1/programs/%d/partners", prog), map[string]any{"partner_id": partner, "approved": true})
	admin("POST", fmt.Sprintf("/admin/v1/programs/%d/links", prog), map[string]any{"partner_id": partner, "code": "LISTENP", "active": true})
	admin("GET", fmt.Sprintf("/admin/v1/catalog/sync?seq=%d&timeout=25s", catalogSeq), nil)

	// The developer's local server.
	got := make(chan received, 16)
	local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- received{header: r.Header.Clone(), body: b}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(local.Close)

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var out, errb syncBuffer
	// A short per-call timeout makes the polls short (wait = timeout -
	// 10 s): the last one, left behind by Ctrl-C, ends soon after.
	env := map[string]string{app.EnvConfigDir: t.TempDir(), app.EnvBaseURL: gw.URL, app.EnvAPIKey: key, app.EnvHTTPTimeout: "12s"}
	exit := make(chan int, 1)
	go func() {
		exit <- app.Run(ctx, []string{"listen", "--forward-to", local.URL + "/hooks"}, app.Options{
			Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return env[k] },
			UserConfigDir: func() (string, error) { return "", errors.New("tests set SVC_CONFIG_DIR") }, Version: "e2e",
		})
	}()
	var secret string
	eventually(t, 30*time.Second, func() error {
		m := readyLine.FindStringSubmatch(out.String())
		if m == nil {
			return fmt.Errorf("no Ready line yet; stdout %q stderr %q", out.String(), errb.String())
		}
		if m[1] != strconv.FormatInt(prog, 10) || m[2] != local.URL+"/hooks" {
			t.Fatalf("ready line %q", m[0])
		}
		secret = m[3]
		return nil
	})

	// A live sale through the gateway, after the partner's click.
	post := func(path, auth string, body any) map[string]any {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", gw.URL+path, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, raw)
		}
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		return m
	}
	click := post("/api/v1/track/click", "", map[string]any{"affiliate_url": "https://listen.example/?via=LISTENP"})
	post("/api/v1/track/sale", key, map[string]any{"transaction_id": "listen-cli-1", "amount_cents": 4200, "currency": "USD", "click_id": click["click_id"]})

	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.After(60 * time.Second)
	for {
		var r received
		select {
		case r = <-got:
		case <-deadline:
			t.Fatalf("no sale.created forwarded; stdout:\n%s\nstderr:\n%s", out.String(), errb.String())
		}
		if err := wh.Verify(r.body, r.header); err != nil {
			t.Fatalf("the signature does not verify: %v\nheaders %v\nbody %s", err, r.header, r.body)
		}
		var body struct {
			ID   string `json:"id"`
			Type string `json:"type"`
			Data struct {
				TransactionID string `json:"transaction_id"`
				AmountCents   int64  `json:"amount_cents"`
			} `json:"data"`
		}
		if err := json.Unmarshal(r.body, &body); err != nil {
			t.Fatal(err)
		}
		if r.header.Get("webhook-id") != body.ID {
			t.Fatalf("webhook-id %q, body id %q", r.header.Get("webhook-id"), body.ID)
		}
		if body.Type != "sale.created" {
			continue
		}
		if body.Data.TransactionID != "listen-cli-1" || body.Data.AmountCents != 4200 {
			t.Fatalf("sale.created %s", r.body)
		}
		// One line per event: time, type, id, → status (duration).
		eventually(t, 10*time.Second, func() error {
			if !regexp.MustCompile(`sale\.created\s+` + body.ID + ` → 204 No Content \(\d+`).MatchString(out.String()) {
				return fmt.Errorf("no line for %s in %q", body.ID, out.String())
			}
			return nil
		})
		break
	}

	// Ctrl-C: exit 0, the listener deleted.
	stop()
	select {
	case code := <-exit:
		if code != app.ExitOK {
			t.Fatalf("exit %d after Ctrl-C; stderr %s", code, errb.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("svc listen did not stop")
	}
	var n int
	if err := st.Instance("webhooks").Platform().Pool.QueryRow(context.Background(), `SELECT count(*) FROM listeners`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d listeners left after Ctrl-C (%v)", n, err)
	}
	if strings.Contains(errb.String(), "could not stop") {
		t.Fatalf("stderr: %s", errb.String())
	}
}
