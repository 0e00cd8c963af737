// Command devstack runs the whole svc stack on one machine (`make run`): an
// embedded Kafka-protocol broker, every service built so far in-process on
// loopback ports, and a gateway on 127.0.0.1:8080 that routes like the
// production ingress. On first start it seeds the demo catalog through the
// admin API. `devstack seed` seeds a running stack (`make seed`).
package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/svc-dev/svc/deploy/devstack/gateway"
	"github.com/svc-dev/svc/deploy/devstack/processorstub"
	"github.com/svc-dev/svc/deploy/devstack/seed"
	"github.com/svc-dev/svc/deploy/devstack/stack"
	"github.com/svc-dev/svc/libs/auth/oidctest"
	"github.com/svc-dev/svc/libs/kafkakit/embedded"
	"github.com/svc-dev/svc/libs/outbox"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := "run"
	if len(args) > 0 && (args[0] == "run" || args[0] == "seed") {
		cmd, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("devstack "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", envOr("GATEWAY_ADDR", "127.0.0.1:8080"), "gateway listen address")
	dataDir := fs.String("data", envOr("DEVSTACK_DATA", ".data"), "directory for local state (keys, logs, broker data, private Postgres)")
	seedFile := fs.String("seed", envOr("SEED_FILE", "deploy/seed/demo.json"), "demo catalog to load")
	base := fs.String("base", envOr("SVC_BASE_URL", "http://127.0.0.1:8080"), "gateway URL of a running stack (seed only)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var err error
	switch cmd {
	case "seed":
		_, err = seedOnce(ctx, stdout, *base, adminToken(), *seedFile, "")
	default:
		err = runStack(ctx, stdout, *addr, *dataDir, *seedFile)
	}
	if err != nil {
		fmt.Fprintln(stderr, "devstack:", err)
		return 1
	}
	return 0
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func adminToken() string { return envOr("ADMIN_TOKEN", "dev-admin-token-for-this-machine-only") }

// internalToken is the service-to-service token of the local stack:
// tracking accepts it on /internal/v1/ and commissions sends it (its
// attribution client). One value for both, fixed so a developer can call
// tracking's internal route by hand; the shell's INTERNAL_TOKEN wins.
func internalToken() string {
	return envOr("INTERNAL_TOKEN", "dev-internal-token-for-this-machine-only")
}

// webhooksSecretKey seals the webhook endpoints' signing secrets of the
// local stack. Fixed, as the admin token is, rather than kept in .data: the
// database usually outlives .data (the machine's Postgres, database svc),
// and endpoints sealed under a key since lost could never be signed again.
// The shell's WEBHOOKS_SECRET_KEY wins.
func webhooksSecretKey() string {
	return envOr("WEBHOOKS_SECRET_KEY", base64.StdEncoding.EncodeToString([]byte("svc-local-webhooks-key-not-prod!")))
}

// processorWebhookSecret is fixed by default so payment-processor events can
// be signed by hand (or by a processor CLI forwarding to the stack) without
// reading it from anywhere first.
func processorWebhookSecret() string { return envOr("PROCESSOR_WEBHOOK_SECRET", "whsec_local_dev") }

func runStack(ctx context.Context, out io.Writer, addr, dataDir, seedFile string) error {
	if err := os.MkdirAll(filepath.Join(dataDir, "logs"), 0o755); err != nil {
		return err
	}
	dsn, stopPG, err := resolvePostgres(ctx, out, dataDir)
	if err != nil {
		return err
	}
	defer stopPG()

	brokers := os.Getenv("KAFKA_BROKERS")
	if brokers == "" {
		brokers = envOr("DEVSTACK_KAFKA_ADDR", "127.0.0.1:9092")
		kafkaDir := filepath.Join(dataDir, "kafka")
		if _, err := os.Stat(kafkaDir); errors.Is(err, fs.ErrNotExist) {
			if err := republishKept(ctx, out, dsn); err != nil {
				return err
			}
		}
		stopKafka, err := embedded.Start(brokers, embedded.Options{DataDir: kafkaDir})
		if err != nil {
			return fmt.Errorf("start the embedded Kafka broker on %s (set DEVSTACK_KAFKA_ADDR to use another address, or KAFKA_BROKERS to use a running cluster): %w", brokers, err)
		}
		defer stopKafka()
		fmt.Fprintf(out, "kafka     embedded broker on %s (data in %s)\n", brokers, filepath.Join(dataDir, "kafka"))
	} else {
		fmt.Fprintf(out, "kafka     %s\n", brokers)
	}

	signing, err := signingSeed(dataDir)
	if err != nil {
		return err
	}
	env := map[string]string{
		"DATABASE_URL":  dsn,
		"KAFKA_BROKERS": brokers,
		// One broker (the embedded one): topics with one replica.
		"KAFKA_REPLICATION_FACTOR":  "1",
		"KAFKA_MIN_INSYNC_REPLICAS": "1",
		"ADMIN_TOKEN":               adminToken(),
		"INTERNAL_TOKEN":            internalToken(),
		"SESSION_SIGNING_KEY":       signing,
		"SESSION_PUBLIC_KEY":        publicKey(signing),
		"TRUSTED_PROXIES":           "127.0.0.1/32,::1/128",
		// Each service's admin, internal and metrics routes on a second
		// loopback port, as in the cluster: the gateway sends its admin
		// rules there, and the public ports answer those routes 404.
		"OPS_HTTP_ADDR": "127.0.0.1:0",
		// Commissions serves the processor's webhook only with a secret.
		"PROCESSOR_WEBHOOK_SECRET": processorWebhookSecret(),
		// Anyone the dev provider signs in gets a user and a workspace at
		// their first dashboard sign-in (accounts' own default is invite).
		"SIGNUP":              "open",
		"WEBHOOKS_SECRET_KEY": webhooksSecretKey(),
		// Brands try webhooks on their own machine: http:// receivers on
		// localhost are allowed here, never in a deployment.
		"WEBHOOKS_ALLOW_PRIVATE": "true",
	}
	gatewayURL := "http://" + addr
	// Where the provider sends the dashboard's browser sign-in back to.
	env["PUBLIC_URL"] = gatewayURL
	if os.Getenv("OIDC_ISSUER") == "" {
		oidcEnv, stopOIDC, err := devSignIn(out, gatewayURL)
		if err != nil {
			return err
		}
		defer stopOIDC()
		for k, v := range oidcEnv {
			env[k] = v
		}
	}
	if os.Getenv("PROCESSOR_API_URL") == "" {
		procEnv, stopProc, err := devProcessor(out, gatewayURL)
		if err != nil {
			return err
		}
		defer stopProc()
		for k, v := range procEnv {
			env[k] = v
		}
	}
	// The stack sets each service's address, schema, CATALOG_CONSUMERS and
	// the other services' URLs; everything else may come from the shell.
	getenv := func(k string) string {
		if v := os.Getenv(k); v != "" {
			return v
		}
		return env[k]
	}
	logDir := filepath.Join(dataDir, "logs")
	logs := map[string]io.Writer{}
	for _, svc := range stack.Services() {
		f, err := os.OpenFile(filepath.Join(logDir, svc.Spec.Name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		logs[svc.Spec.Name] = f
	}
	st, err := stack.Start(ctx, stack.Options{Env: getenv, Logs: func(service string) io.Writer { return logs[service] }})
	if err != nil {
		return fmt.Errorf("%w (logs in %s)", err, logDir)
	}
	defer func() { _ = st.Close() }()
	for _, name := range st.Names() {
		fmt.Fprintf(out, "%-9s %s, admin, internal and metrics on %s (log %s)\n", name, st.URL(name), st.OpsURL(name), filepath.Join(logDir, name+".log"))
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("gateway: listen on %s (set GATEWAY_ADDR to use another address): %w", addr, err)
	}
	// The gateway's /readyz says ready only once the demo catalog is
	// seeded (through this gateway), so a script waiting on it can use the
	// demo program at once.
	started := make(chan struct{})
	// The services' own servers are bypassed (the gateway calls their
	// handlers), so the gateway's server has their timeouts.
	srv := &http.Server{
		Handler:           gateway.New(st.Handlers(), gateway.StartedWhen(started)),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      70 * time.Second, // the sync barrier may wait up to 60s
		IdleTimeout:       120 * time.Second,
	}
	go func() { _ = srv.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	baseURL := "http://" + ln.Addr().String()
	fmt.Fprintf(out, "gateway   %s\n", baseURL)

	res, err := seedOnce(ctx, out, baseURL, adminToken(), seedFile, filepath.Join(dataDir, "page"))
	if err != nil {
		return err
	}
	stopReceiver := demoWebhook(ctx, out, baseURL, res)
	defer stopReceiver()
	printDashboardLink(out, baseURL)
	close(started)
	fmt.Fprintf(out, "health    %s/healthz (the gateway serves) and %s/readyz (200 once every service is ready and the demo is seeded, 503 naming each service's state until then)\n", baseURL, baseURL)
	fmt.Fprintf(out, "          a script can wait for the stack with: until curl -fs %s/readyz >/dev/null; do sleep 1; done\n", baseURL)
	fmt.Fprintln(out, "stack is up; Ctrl-C stops it")
	<-ctx.Done()
	fmt.Fprintln(out, "stopping")
	return nil
}

// republishKept runs before a broker on a new data directory (the first
// start, or after rm -rf .data) starts over the database, which usually
// outlives .data (the machine's Postgres keeps database svc): the events
// published to the old broker and not yet consumed are in no log any more,
// and the replicas would never catch up (the catalog's sync barrier, and so
// the seed, would wait for ever). Every event the services' outboxes still
// keep is published again; consumers skip those they applied. Tracking's
// and commissions' outboxes delete what they published: a conversion or a
// commission event not consumed before .data went stays lost, as it would
// with a broker that lost its disk.
func republishKept(ctx context.Context, out io.Writer, dsn string) error {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return fmt.Errorf("republish kept events: %w", err)
	}
	defer pool.Close()
	var total int64
	var each []string
	for _, svc := range stack.Services() {
		// The stack gives each service the schema of its name.
		n, err := outbox.Republish(ctx, pool, svc.Spec.Name)
		if err != nil {
			return fmt.Errorf("republish kept events: %w", err)
		}
		if n > 0 {
			total += n
			each = append(each, fmt.Sprintf("%s %d", svc.Spec.Name, n))
		}
	}
	if total > 0 {
		fmt.Fprintf(out, "kafka     new broker over a database with history: %d published events queued to publish again (%s)\n", total, strings.Join(each, ", "))
	}
	return nil
}

// seedOnce makes sure the demo catalog exists (the seed creates only what
// is missing, so every start runs it) and prints the demo program, its keys
// and what to try. With pageDir it also writes a page that loads the
// tracker there.
func seedOnce(ctx context.Context, out io.Writer, baseURL, token, seedFile, pageDir string) (seed.Result, error) {
	c := &seed.Client{BaseURL: baseURL, AdminToken: token, HTTP: &http.Client{Timeout: 60 * time.Second}}
	demo, err := seed.Load(seedFile)
	if err != nil {
		return seed.Result{}, err
	}
	res, err := seed.Run(ctx, c, demo)
	if err != nil {
		return seed.Result{}, fmt.Errorf("seed: %w", err)
	}
	if res.Created > 0 {
		fmt.Fprintf(out, "seeded    demo catalog from %s (%d created or updated)\n", seedFile, res.Created)
	} else {
		fmt.Fprintf(out, "seeded    demo catalog from %s was already there\n", seedFile)
	}
	fmt.Fprintf(out, "\ndemo      program %d, partner %d, link code %q\n", res.ProgramID, res.PartnerID, res.LinkCode)
	for _, k := range res.Keys {
		if k.Test {
			fmt.Fprintf(out, "test key  %s  (key %d: test mode; sales and leads with it are test events and convert no one)\n", k.Key, k.ID)
		} else {
			fmt.Fprintf(out, "live key  %s  (key %d: real attribution; a sale with it converts the customer)\n", k.Key, k.ID)
		}
	}
	fmt.Fprintf(out, "origins   pages on these origins may load the tracker and record clicks (the program's allowed origins):\n")
	for _, o := range res.AllowedOrigins {
		fmt.Fprintf(out, "            %s\n", o)
	}
	live, hasLive := res.Key(false)
	fmt.Fprintf(out, "\nTry it:\n  curl -s -H 'Authorization: Bearer %s' %s/admin/v1/programs/%d\n", token, baseURL, res.ProgramID)
	fmt.Fprintf(out, "  curl -s -X POST %s/api/v1/track/click -H 'Content-Type: application/json' -d '{\"affiliate_url\":\"https://demo-brand.example/?via=%s\"}'\n", baseURL, res.LinkCode)
	if hasLive {
		fmt.Fprintf(out, "  make cli && SVC_BASE_URL=%s SVC_API_KEY=%s bin/svc status\n", baseURL, live.Key)
		fmt.Fprintf(out, "\nA sale and a refund (the sale needs the click_id the click above answered):\n")
		fmt.Fprintf(out, "  curl -s -X POST %s/api/v1/track/sale -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' -d '{\"transaction_id\":\"order_1\",\"amount_cents\":4900,\"currency\":\"USD\",\"click_id\":\"<click_id>\"}'\n", baseURL, live.Key)
		fmt.Fprintf(out, "  curl -s -X POST %s/api/v1/track/refund -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' -d '{\"transaction_id\":\"order_1\",\"refund_amount_cents\":1000,\"refund_id\":\"re_1\"}'\n", baseURL, live.Key)
		fmt.Fprintf(out, "  curl -s -H 'Authorization: Bearer %s' %s/admin/v1/partners/%d/balances   # the partner's balance, in cents\n", token, baseURL, res.PartnerID)
	}
	fmt.Fprintln(out)
	printProcessorWebhook(out, baseURL, processorWebhookSecret(), strconv.FormatInt(res.ProgramID, 10), demo.ProcessorAccount)
	page := trackerPage(baseURL, res)
	if pageDir != "" {
		path := filepath.Join(pageDir, "demo.html")
		if err := os.MkdirAll(pageDir, 0o755); err != nil {
			return res, err
		}
		if err := os.WriteFile(path, []byte(page), 0o644); err != nil {
			return res, err
		}
		fmt.Fprintf(out, "\nA page that loads the tracker (also saved as %s). Serve it from an allowed origin and open it through the referral link:\n", path)
		fmt.Fprintf(out, "  (cd %s && python3 -m http.server 8000)   then open http://localhost:8000/demo.html?via=%s\n\n", pageDir, res.LinkCode)
	} else {
		fmt.Fprintf(out, "\nA page that loads the tracker: save it as demo.html, serve it with `python3 -m http.server 8000` and open http://localhost:8000/demo.html?via=%s\n\n", res.LinkCode)
	}
	fmt.Fprintln(out, page)
	return res, nil
}

// trackerPage is a minimal brand page: the tracker records the click of a
// visitor who arrives through the referral link, and the form records the
// signup as a lead in browser mode.
func trackerPage(baseURL string, res seed.Result) string {
	return fmt.Sprintf(`<!doctype html>
<meta charset="utf-8">
<title>svc demo page</title>
<script src="%s/svc.js" data-program-id="%d" async></script>
<h1>Demo brand</h1>
<p>Open this page as <code>?via=%s</code> to arrive through the demo partner's link.</p>
<form id="signup">
  <input name="email" type="email" placeholder="you@example.com" required>
  <button>Sign up</button>
</form>
<pre id="result"></pre>
<script>
  document.getElementById('signup').addEventListener('submit', async function (e) {
    e.preventDefault();
    var email = e.target.email.value;
    var body = await svc.lead({customer_key: email, email: email});
    document.getElementById('result').textContent = JSON.stringify(body, null, 2);
  });
</script>
`, baseURL, res.ProgramID, res.LinkCode)
}

// printProcessorWebhook tells how to play the payment processor against the
// local stack: a signed payment of the demo program and its refund, as
// shell lines that work as pasted (e2e runs them). The signature uses
// openssl so it needs nothing from the repo.
func printProcessorWebhook(out io.Writer, baseURL, secret, programID, account string) {
	fmt.Fprintf(out, "Processor events: POST %s/api/v1/webhooks/processor, signed with PROCESSOR_WEBHOOK_SECRET=%s\n", baseURL, secret)
	fmt.Fprintln(out, "  (header Processor-Signature: t=<unix>,v1=<hex HMAC-SHA256(secret, \"<t>.<body>\")>)")
	fmt.Fprintln(out, "A payment of 25.00 USD and its 10.00 refund as the processor sends them (put the click_id of the click above in cid):")
	acct := ""
	if account != "" {
		acct = `"account":"` + account + `",`
	}
	fmt.Fprint(out, strings.NewReplacer("{url}", baseURL, "{secret}", secret, "{program}", programID, "{account}", acct).Replace(processorExample))
}

// processorExample is the shell of printProcessorWebhook: hook signs and
// posts one event; the payment names the click and the program in its
// metadata, both come from the demo's connected account, and the refund
// names the payment.
const processorExample = `  cid=<click_id>; n=$(date +%s)
  hook() { t=$(date +%s); sig=$(printf '%s.%s' "$t" "$1" | openssl dgst -sha256 -hmac '{secret}' -r | cut -d' ' -f1); curl -s -X POST {url}/api/v1/webhooks/processor -H "Processor-Signature: t=$t,v1=$sig" -H 'Content-Type: application/json' -d "$1"; echo; }
  hook '{"id":"evt_pay_'$n'",{account}"type":"checkout.session.completed","data":{"object":{"id":"cs_'$n'","mode":"payment","payment_status":"paid","amount_total":2500,"currency":"usd","payment_intent":"pi_'$n'","metadata":{"svc_click_id":"'$cid'","program_id":"{program}"}}}}'
  hook '{"id":"evt_refund_'$n'",{account}"type":"refund.created","data":{"object":{"id":"re_'$n'","amount":1000,"currency":"usd","payment_intent":"pi_'$n'","status":"succeeded"}}}'

`

// devSignIn serves a stand-in OpenID provider for `svc login` on the local
// stack: its sign-in page signs in as DEV_LOGIN_EMAIL (the demo owner by
// default) and posts the command-line sign-in to the gateway's callback,
// whose page shows the code to confirm (svc login printed it). It
// exists only here; real deployments set OIDC_* to a real provider.
func devSignIn(out io.Writer, gatewayURL string) (map[string]string, func(), error) {
	ln, err := net.Listen("tcp", envOr("DEV_OIDC_ADDR", "127.0.0.1:0"))
	if err != nil {
		return nil, nil, fmt.Errorf("dev sign-in provider: %w", err)
	}
	base := "http://" + ln.Addr().String()
	p, err := oidctest.New(oidctest.WithIssuer(base), oidctest.WithClientID("svc-cli-local"))
	if err != nil {
		_ = ln.Close()
		return nil, nil, fmt.Errorf("dev sign-in provider: %w", err)
	}
	p.SetBaseURL(base)
	p.SetSignIn(&oidctest.SignIn{
		Email: envOr("DEV_LOGIN_EMAIL", "owner@demo-brand.example"), EmailVerified: true, Name: "Local developer",
		CallbackURL: gatewayURL + "/api/v1/cli/auth/callback",
		// The dashboard's sign-in (response_mode=form_post) gets a form
		// that posts itself back to the gateway: one click signs in.
		AutoSubmit: true,
	})
	srv := &http.Server{Handler: p.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	fmt.Fprintf(out, "sign-in   dev OpenID provider on %s (svc login and the dashboard sign in as %s)\n", base, envOr("DEV_LOGIN_EMAIL", "owner@demo-brand.example"))
	return p.Env(), func() { _ = srv.Close() }, nil
}

// devProcessor serves the stand-in payment processor (processorstub) for
// the console's Settings > Payments: its authorize page approves in one
// click, and its test-payment page posts signed checkout and refund events
// of the connected account to the gateway's processor webhook. It exists
// only here; real deployments set PROCESSOR_* to the real processor.
func devProcessor(out io.Writer, gatewayURL string) (map[string]string, func(), error) {
	ln, err := net.Listen("tcp", envOr("DEV_PROCESSOR_ADDR", "127.0.0.1:0"))
	if err != nil {
		return nil, nil, fmt.Errorf("stand-in payment processor: %w", err)
	}
	base := "http://" + ln.Addr().String()
	stub := processorstub.New(processorstub.Config{ClientID: "ca_local_dev", Secret: "sk_local_dev_platform",
		WebhookURL: gatewayURL + "/api/v1/webhooks/processor", WebhookSecret: processorWebhookSecret()})
	srv := &http.Server{Handler: stub.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	fmt.Fprintf(out, "processor stand-in payment processor on %s (connect it from the dashboard: Settings > Payments; then send a test payment at %s/test-payment)\n", base, base)
	return stub.Env(base), func() { _ = srv.Close() }, nil
}

// printDashboardLink prints the link that signs the demo owner in to the
// dashboard: it starts the browser sign-in, the dev provider approves
// DEV_LOGIN_EMAIL and posts back by itself, and accounts sends the browser
// to /dashboard/ with the session. With a real provider (OIDC_ISSUER set)
// the link leads to its sign-in page instead.
func printDashboardLink(out io.Writer, baseURL string) {
	who := "the demo owner " + envOr("DEV_LOGIN_EMAIL", "owner@demo-brand.example")
	if os.Getenv("OIDC_ISSUER") != "" {
		who = "your OpenID provider's account"
	}
	fmt.Fprintf(out, "dashboard %s/api/v1/dashboard/auth/start?return_to=/dashboard/\n", baseURL)
	fmt.Fprintf(out, "          (open it in a browser: one click signs %s in)\n", who)
}

// signingSeed returns the dashboard-session signing seed, made once and kept
// in dataDir so tokens survive a restart of the local stack.
func signingSeed(dataDir string) (string, error) {
	return persistedKey(dataDir, "SESSION_SIGNING_KEY", "session-signing.key", ed25519.SeedSize)
}

// persistedKey is the variable name's value when set, otherwise the base64
// of size random bytes kept in dataDir's file: the same key on the next run,
// so what it signed or sealed stays usable.
func persistedKey(dataDir, name, file string, size int) (string, error) {
	if v := os.Getenv(name); v != "" {
		return v, nil
	}
	path := filepath.Join(dataDir, file)
	if b, err := os.ReadFile(path); err == nil {
		return string(b), nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	s := make([]byte, size)
	if _, err := rand.Read(s); err != nil {
		return "", err
	}
	enc := base64.StdEncoding.EncodeToString(s)
	return enc, os.WriteFile(path, []byte(enc), 0o600)
}

func publicKey(seedB64 string) string {
	s, err := base64.StdEncoding.DecodeString(seedB64)
	if err != nil || len(s) != ed25519.SeedSize {
		return ""
	}
	return base64.StdEncoding.EncodeToString(ed25519.NewKeyFromSeed(s).Public().(ed25519.PublicKey))
}
