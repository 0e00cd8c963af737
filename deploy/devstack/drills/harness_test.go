package drills_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/proto"

	"github.com/svc-dev/svc/deploy/devstack/gateway"
	"github.com/svc-dev/svc/deploy/devstack/seed"
	"github.com/svc-dev/svc/deploy/devstack/stack"
	"github.com/svc-dev/svc/deploy/devstack/stack/stacktest"
	"github.com/svc-dev/svc/libs/kafkakit/embedded"
	"github.com/svc-dev/svc/libs/platform"
	"github.com/svc-dev/svc/libs/platform/platformtest"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
)

// TestMain doubles as the broker process: with DRILLS_BROKER_ADDR set the
// test binary runs an embedded broker until SIGTERM, nothing else. The
// drills run the broker in a process of its own, so stopping it is a
// process stopping, and the soak's heap is the services' alone (the
// broker keeps every record in memory). With DRILLS_SERVICE set it is that
// service's process instead (serviceProc), which a drill kills.
func TestMain(m *testing.M) {
	if addr := os.Getenv("DRILLS_BROKER_ADDR"); addr != "" {
		os.Exit(runBroker(addr, os.Getenv("DRILLS_BROKER_DIR")))
	}
	if name := os.Getenv("DRILLS_SERVICE"); name != "" {
		os.Exit(runService(name))
	}
	os.Exit(m.Run())
}

// runService is the service's main(): platform.Run of its Spec with
// `serve`, reading the process's environment, until SIGTERM.
func runService(name string) int {
	for _, svc := range stack.Services() {
		if svc.Spec.Name == name {
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			return platform.Run(ctx, svc.Spec, []string{"serve"}, os.Getenv, os.Stdout)
		}
	}
	fmt.Fprintf(os.Stderr, "DRILLS_SERVICE=%s: no such service in the stack\n", name)
	return 2
}

func runBroker(addr, dir string) int {
	stop, err := embedded.Start(addr, embedded.Options{DataDir: dir})
	if err != nil {
		fmt.Fprintf(os.Stderr, "start the broker on %s: %v\n", addr, err)
		return 1
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	fmt.Println(brokerReady)
	<-sig
	stop()
	return 0
}

const brokerReady = "broker ready"

// broker is an embedded broker in a child process on a fixed address and
// data directory, so it can be stopped and started again as the same
// broker, with its topics, records and committed offsets.
type broker struct {
	t    testing.TB
	addr string
	dir  string
	mu   sync.Mutex
	cmd  *exec.Cmd
}

func startBroker(t testing.TB) *broker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &broker{t: t, addr: ln.Addr().String(), dir: t.TempDir()}
	_ = ln.Close()
	b.up()
	t.Cleanup(b.down)
	return b
}

// up starts the broker process and returns once it serves.
func (b *broker) up() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd != nil {
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "DRILLS_BROKER_ADDR="+b.addr, "DRILLS_BROKER_DIR="+b.dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.t.Fatalf("start the broker process: %v", err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != brokerReady {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		b.t.Fatalf("the broker process did not start: %q %v", line, err)
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	b.cmd = cmd
}

// down stops the broker process (SIGTERM, as an orchestrator would) and
// waits for it to exit.
func (b *broker) down() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd == nil {
		return
	}
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	_ = b.cmd.Wait()
	b.cmd = nil
}

// serviceProc is a service of the stack in a child process (the test
// binary with DRILLS_SERVICE set) on a fixed address, so it can be killed
// and started again as the same service, the way an orchestrator restarts
// a pod. It is an http.Handler for the gateway: a reverse proxy to the
// process, as an ingress is.
type serviceProc struct {
	t     testing.TB
	name  string
	addr  string
	env   []string
	proxy http.Handler
	logs  *lockedBuffer
	mu    sync.Mutex
	cmd   *exec.Cmd
	done  chan struct{} // closed when cmd has exited
}

// startServiceProc starts service name in a child process with env (its
// environment in the stack: stacktest.StartElsewhere), on a loopback port
// of its own, and returns once it is ready. The process is stopped
// (SIGTERM) when the test ends.
func startServiceProc(t testing.TB, name string, env map[string]string) *serviceProc {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	// Only the stack's variables, as the in-process services read only
	// those, and what a process needs to run at all.
	vars := []string{"DRILLS_SERVICE=" + name}
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "GORACE", "GOCOVERDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			vars = append(vars, k+"="+v)
		}
	}
	for k, v := range env {
		if k != "HTTP_ADDR" {
			vars = append(vars, k+"="+v)
		}
	}
	vars = append(vars, "HTTP_ADDR="+addr)
	p := &serviceProc{t: t, name: name, addr: addr, env: vars, logs: &lockedBuffer{},
		proxy: httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: addr})}
	t.Cleanup(func() {
		if err := p.stop(); err != nil {
			t.Errorf("%s process: %v", name, err)
		}
		if t.Failed() {
			t.Logf("%s process output:\n%s", name, p.logs.String())
		}
	})
	p.up()
	return p
}

func (p *serviceProc) ServeHTTP(w http.ResponseWriter, r *http.Request) { p.proxy.ServeHTTP(w, r) }

// up starts the process and returns once its /readyz answers 200.
func (p *serviceProc) up() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = p.logs, p.logs
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("start the %s process: %v", p.name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	p.cmd, p.done = cmd, done
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + p.addr + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-done:
			p.t.Fatalf("the %s process exited while starting (%s):\n%s", p.name, cmd.ProcessState, p.logs.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("the %s process was not ready within 60s:\n%s", p.name, p.logs.String())
		}
	}
}

// kill ends the process with SIGKILL: no shutdown at all, as when a node
// dies or the kernel's OOM killer strikes. It returns once the process is
// gone.
func (p *serviceProc) kill() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		p.t.Fatalf("kill the %s process: %v", p.name, err)
	}
	<-p.done
	p.cmd = nil
}

// stop stops the process gracefully (SIGTERM) and reports a failed exit
// (a data race the child's detector found, a shutdown error).
func (p *serviceProc) stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return nil
	}
	cmd := p.cmd
	p.cmd = nil
	_ = cmd.Process.Signal(syscall.SIGTERM)
	<-p.done
	if !cmd.ProcessState.Success() {
		return fmt.Errorf("exited with %s", cmd.ProcessState)
	}
	return nil
}

// lockedBuffer collects a child's output, written from the goroutines
// exec starts and read by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// drillStack is the whole stack (every service of stack.Services, or those
// of drillOptions) on a fresh database and a restartable broker, behind
// the local gateway, with the demo catalog seeded through it.
type drillStack struct {
	t       *testing.T
	broker  *broker
	st      *stack.Stack
	gateway string
	admin   *seed.Client
	demo    seed.Result
	key     string // the demo program's live server key
	exited  map[string]*atomic.Bool
	// procs are the services running in child processes, by name.
	procs map[string]*serviceProc
}

// drillOptions change the stack a drill runs.
type drillOptions struct {
	// only: these services of the stack, not all of them.
	only []string
	// apart: these (of only) run in child processes (serviceProc), the
	// others in the test's process.
	apart []string
	// env: variables on top of the drills' own.
	env map[string]string
}

func startDrillStack(t *testing.T) *drillStack {
	t.Helper()
	return startDrillStackWith(t, drillOptions{})
}

func startDrillStackWith(t *testing.T, opts drillOptions) *drillStack {
	t.Helper()
	b := startBroker(t)
	st, apart := stacktest.StartElsewhere(t, platformtest.With(map[string]string{
		"KAFKA_BROKERS": b.addr,
		// Keep published outbox rows: the drills compare them with the topics.
		"OUTBOX_DELETE_SENT": "false",
		// Traffic comes from few addresses; the limits are tested elsewhere.
		"TRACK_CLICK_RATE_LIMIT": "1000000",
		"TRACK_LEAD_RATE_LIMIT":  "1000000",
		"ADMIN_RATE_LIMIT":       "1000000",
	}, opts.env), opts.apart, opts.only...)
	handlers := st.Handlers()
	procs := map[string]*serviceProc{}
	for name, env := range apart {
		procs[name] = startServiceProc(t, name, env)
		handlers[name] = procs[name]
	}
	gw := httptest.NewServer(gateway.New(handlers))
	t.Cleanup(gw.Close)
	d := &drillStack{t: t, broker: b, st: st, gateway: gw.URL, exited: map[string]*atomic.Bool{}, procs: procs}
	for _, name := range st.Names() {
		gone := &atomic.Bool{}
		d.exited[name] = gone
		inst := st.Instance(name)
		go func() { _ = inst.Wait(); gone.Store(true) }()
	}
	d.admin = &seed.Client{BaseURL: gw.URL, AdminToken: stacktest.AdminToken, HTTP: &http.Client{Timeout: 90 * time.Second}}
	file, err := seed.Load("../../seed/demo.json")
	if err != nil {
		t.Fatal(err)
	}
	d.demo, err = seed.Run(context.Background(), d.admin, file)
	if err != nil {
		t.Fatalf("seed: %v", err)
	}
	k, ok := d.demo.Key(false)
	if !ok {
		t.Fatal("the demo seed issued no live key")
	}
	d.key = k.Key
	return d
}

// wantAllRunning fails if a service process has stopped.
func (d *drillStack) wantAllRunning() {
	d.t.Helper()
	for name, gone := range d.exited {
		if gone.Load() {
			d.t.Fatalf("service %s stopped", name)
		}
	}
}

type answer struct {
	status int
	body   map[string]any
	raw    string
}

// call sends one request through the gateway from client address ip. A
// transport error is an answer with status 0: the drills count it as
// refused, never stop on it.
func (d *drillStack) call(method, path, ip string, body any, headers ...string) answer {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	}
	req, err := http.NewRequest(method, d.gateway+path, rd)
	if err != nil {
		return answer{raw: err.Error()}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("X-Forwarded-For", ip)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{raw: err.Error()}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, raw: string(raw)}
	_ = json.Unmarshal(raw, &a.body)
	return a
}

// traffic is what a load run sent and what came back.
type traffic struct {
	mu sync.Mutex
	// clicks are the click ids answered 200, in answer order per client.
	clicks  []string
	leads   int
	admin   int
	refused []string // requests not answered 2xx: status and body
	// ordered are the attribution windows the sequential admin client set,
	// in order: each set only after the previous one was answered.
	ordered []int
	// chain is one client's clicks, each sent after the previous answer.
	chain []string
	// countOnly keeps counts instead of ids (a soak would otherwise grow
	// the test's own heap with every click).
	countOnly bool
	nClicks   int
}

func (tr *traffic) clicked(list *[]string, id string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.nClicks++
	if !tr.countOnly {
		*list = append(*list, id)
	}
}

func (tr *traffic) refuse(what string, a answer) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.refused) < 20 {
		tr.refused = append(tr.refused, fmt.Sprintf("%s: %d %s", what, a.status, a.raw))
	} else {
		tr.refused = append(tr.refused, "")
	}
}

// load sends mixed traffic through the gateway until ctx ends: clicks
// followed by leads from several clients, a chain of clicks from one
// client, partners, enrolments and links created by the admin API, and a
// sequence of program updates. It returns when every client has stopped.
func (d *drillStack) load(ctx context.Context, tr *traffic, clients int) {
	var wg sync.WaitGroup
	var n atomic.Int64
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ip := fmt.Sprintf("203.0.113.%d", c+1)
			for !paced(ctx, clickPace) {
				a := d.call("POST", "/api/v1/track/click", ip, map[string]any{"affiliate_url": "https://demo.example/?via=" + d.demo.LinkCode})
				if a.status != 200 {
					tr.refuse("click", a)
					continue
				}
				cid, _ := a.body["click_id"].(string)
				tr.clicked(&tr.clicks, cid)
				if n.Add(1)%3 != 0 {
					continue
				}
				email := fmt.Sprintf("lead-%s@drill.example", cid)
				a = d.call("POST", "/api/v1/track/lead", ip, map[string]any{"click_id": cid, "customer_key": email, "email": email},
					"Authorization", "Bearer "+d.key)
				if a.status != 200 {
					tr.refuse("lead", a)
					continue
				}
				tr.mu.Lock()
				tr.leads++
				tr.mu.Unlock()
			}
		}()
	}
	wg.Add(3)
	go func() { // one client's chain of clicks: their events must keep this order
		defer wg.Done()
		for !paced(ctx, clickPace) {
			a := d.call("POST", "/api/v1/track/click", "198.18.0.1", map[string]any{"affiliate_url": "https://demo.example/?via=" + d.demo.LinkCode})
			if a.status != 200 {
				tr.refuse("chain click", a)
				continue
			}
			cid, _ := a.body["click_id"].(string)
			tr.clicked(&tr.chain, cid)
		}
	}()
	go func() { // catalog writes: partners, enrolments, links
		defer wg.Done()
		// A write under way when the load stops is finished, not cut off.
		call := context.WithoutCancel(ctx)
		for i := 0; !paced(ctx, adminPace); i++ {
			var p struct {
				ID int64 `json:"id"`
			}
			name := fmt.Sprintf("drill-partner-%d-%d", time.Now().UnixNano(), i)
			if err := d.admin.Call(call, "POST", "/admin/v1/partners", map[string]any{"name": name, "email": name + "@drill.example"}, &p); err != nil {
				tr.refuse("create partner", answer{raw: err.Error()})
				continue
			}
			if err := d.admin.Call(call, "POST", fmt.Sprintf("/admin/v1/programs/%d/partners", d.demo.ProgramID), map[string]any{"partner_id": p.ID, "approved": true}, nil); err != nil {
				tr.refuse("enrol partner", answer{raw: err.Error()})
				continue
			}
			if err := d.admin.Call(call, "POST", fmt.Sprintf("/admin/v1/programs/%d/links", d.demo.ProgramID), map[string]any{"partner_id": p.ID, "code": fmt.Sprintf("DRILL%d", p.ID), "active": true}, nil); err != nil {
				tr.refuse("create link", answer{raw: err.Error()})
				continue
			}
			tr.mu.Lock()
			tr.admin += 3
			tr.mu.Unlock()
		}
	}()
	go func() { // ordered program updates
		defer wg.Done()
		call := context.WithoutCancel(ctx)
		for w := 0; !paced(ctx, adminPace); w++ {
			window := 1 + w%365
			if err := d.admin.Call(call, "PATCH", fmt.Sprintf("/admin/v1/programs/%d", d.demo.ProgramID), map[string]any{"attribution_window_days": window}, nil); err != nil {
				tr.refuse("update program", answer{raw: err.Error()})
				continue
			}
			tr.mu.Lock()
			if !tr.countOnly {
				tr.ordered = append(tr.ordered, window)
			}
			tr.admin++
			tr.mu.Unlock()
		}
	}()
	wg.Wait()
}

// The clients' pace: steady traffic from a handful of visitors and
// operators, not a benchmark (the machine runs other tests meanwhile).
const (
	clickPace = 25 * time.Millisecond
	adminPace = 200 * time.Millisecond
)

// paced waits pause between two requests of a client and reports whether
// ctx has ended.
func paced(ctx context.Context, pause time.Duration) bool {
	select {
	case <-ctx.Done():
		return true
	case <-time.After(pause):
		return false
	}
}

// caughtUp waits until the catalog is applied by every replica (the sync
// barrier) and every outbox is published, and fails if a row was parked.
func (d *drillStack) caughtUp() {
	d.t.Helper()
	began := time.Now()
	for attempt := 1; ; attempt++ {
		ctx, stop := context.WithTimeout(context.Background(), 45*time.Second)
		err := d.admin.Sync(ctx, 30*time.Second)
		stop()
		if err == nil {
			d.t.Logf("caught up %s after asking", time.Since(began).Round(time.Millisecond))
			break
		}
		d.t.Logf("sync barrier, attempt %d: %v; %s", attempt, err, d.consumerReport())
		if time.Since(began) > 3*time.Minute {
			d.t.Fatalf("the replicas did not catch up within %s", time.Since(began).Round(time.Second))
		}
	}
	pool := d.st.Instance("tracking").Platform().Pool
	for _, schema := range d.st.Names() {
		waitFor(d.t, 60*time.Second, schema+"'s outbox drained", func() bool {
			return count(d.t, pool, fmt.Sprintf(`SELECT count(*) FROM %s.outbox WHERE sent_at IS NULL AND parked_at IS NULL`, schema)) == 0
		})
		if n := count(d.t, pool, fmt.Sprintf(`SELECT count(*) FROM %s.outbox WHERE parked_at IS NOT NULL`, schema)); n != 0 {
			d.t.Fatalf("%s parked %d outbox rows", schema, n)
		}
	}
}

// consumerReport is each service's consumer and relay metrics, for a
// failure message.
func (d *drillStack) consumerReport() string {
	var b strings.Builder
	for _, name := range d.st.Names() {
		mfs, err := d.st.Instance(name).Platform().Registry.Gather()
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, "[%s", name)
		for _, mf := range mfs {
			n := mf.GetName()
			if !strings.HasPrefix(n, "consumer_") && !strings.HasPrefix(n, "inbox_fetch") && n != "outbox_backlog" && n != "kafka_up" {
				continue
			}
			for _, m := range mf.GetMetric() {
				v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
				var labels []string
				for _, l := range m.GetLabel() {
					labels = append(labels, l.GetValue())
				}
				fmt.Fprintf(&b, " %s%v=%g", n, labels, v)
			}
		}
		b.WriteString("]")
	}
	return b.String()
}

// topicMessages reads every record of topic from the beginning to its end
// as it is now.
func (d *drillStack) topicMessages(topic string) []kafka.Message {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := &kafka.Client{Addr: kafka.TCP(d.broker.addr), Timeout: 10 * time.Second}
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil || len(md.Topics) != 1 || md.Topics[0].Error != nil {
		d.t.Fatalf("metadata of %s: %v %+v", topic, err, md)
	}
	var reqs []kafka.OffsetRequest
	for _, p := range md.Topics[0].Partitions {
		reqs = append(reqs, kafka.LastOffsetOf(p.ID))
	}
	offs, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: reqs}})
	if err != nil {
		d.t.Fatalf("offsets of %s: %v", topic, err)
	}
	var out []kafka.Message
	for _, po := range offs.Topics[topic] {
		if po.Error != nil {
			d.t.Fatalf("offsets of %s/%d: %v", topic, po.Partition, po.Error)
		}
		if po.LastOffset <= 0 {
			continue
		}
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{d.broker.addr}, Topic: topic, Partition: po.Partition, MaxWait: 100 * time.Millisecond})
		for {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				_ = r.Close()
				d.t.Fatalf("read %s/%d: %v", topic, po.Partition, err)
			}
			out = append(out, m)
			if m.Offset >= po.LastOffset-1 {
				break
			}
		}
		_ = r.Close()
	}
	return out
}

// envelope decodes a record's value.
func envelope(t testing.TB, m kafka.Message) *eventsv1.Envelope {
	t.Helper()
	env := &eventsv1.Envelope{}
	if err := proto.Unmarshal(m.Value, env); err != nil {
		t.Fatalf("decode %s/%d@%d: %v", m.Topic, m.Partition, m.Offset, err)
	}
	return env
}

// hookSink is a brand's webhook endpoint in a drill: it answers 200 and
// counts the webhooks it gets by type and by webhook-id.
type hookSink struct {
	mu     sync.Mutex
	byType map[string]int
	ids    map[string]int
}

// webhookEndpoint points a webhook endpoint of the demo program, for
// types, at a new sink.
func (d *drillStack) webhookEndpoint(types ...string) *hookSink {
	d.t.Helper()
	s := &hookSink{byType: map[string]int{}, ids: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev struct {
			Type string `json:"type"`
		}
		_ = json.NewDecoder(r.Body).Decode(&ev)
		s.mu.Lock()
		s.byType[ev.Type]++
		s.ids[r.Header.Get("webhook-id")]++
		s.mu.Unlock()
	}))
	d.t.Cleanup(srv.Close)
	d.endpoint(srv.URL, types...)
	return s
}

// endpoint creates a webhook endpoint of the demo program for types at
// target, through the public route as the demo owner, once every replica has
// the catalog, and returns its id and signing secret.
func (d *drillStack) endpoint(target string, types ...string) (id int64, secret string) {
	d.t.Helper()
	var sess struct {
		Token string `json:"token"`
	}
	if err := d.admin.Call(context.Background(), "POST", "/admin/v1/sessions", map[string]any{"user_id": d.demo.UserID}, &sess); err != nil {
		d.t.Fatal(err)
	}
	d.caughtUp()
	a := d.call("POST", fmt.Sprintf("/api/v1/programs/%d/webhooks", d.demo.ProgramID), "198.18.0.9",
		map[string]any{"url": target, "events": types}, "Authorization", "Bearer "+sess.Token)
	data, _ := a.body["data"].(map[string]any)
	n, _ := data["id"].(float64)
	secret, _ = data["secret"].(string)
	if a.status != 201 || n == 0 || secret == "" {
		d.t.Fatalf("create the drill's webhook endpoint: %d %s", a.status, a.raw)
	}
	return int64(n), secret
}

// lead records a click on the demo link and a lead for it through the
// gateway with the demo program's key, from client address ip, and
// returns the lead's customer key.
func (d *drillStack) lead(ip string) string {
	d.t.Helper()
	a := d.call("POST", "/api/v1/track/click", ip, map[string]any{"affiliate_url": "https://demo.example/?via=" + d.demo.LinkCode})
	cid, _ := a.body["click_id"].(string)
	if a.status != 200 || cid == "" {
		d.t.Fatalf("click: %d %s", a.status, a.raw)
	}
	email := fmt.Sprintf("lead-%s@drill.example", cid)
	a = d.call("POST", "/api/v1/track/lead", ip, map[string]any{"click_id": cid, "customer_key": email, "email": email},
		"Authorization", "Bearer "+d.key)
	if a.status != 200 {
		d.t.Fatalf("lead: %d %s", a.status, a.raw)
	}
	return email
}

// got is how many webhooks of typ arrived, and how many webhook-ids came
// more than once.
func (s *hookSink) got(typ string) (n, repeated int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.ids {
		if c > 1 {
			repeated++
		}
	}
	return s.byType[typ], repeated
}
