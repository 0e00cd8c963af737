package pgtest

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy forwards TCP connections to a Postgres server and injects the one
// fault that pg_terminate_backend cannot aim at: a connection cut after the
// server committed a transaction but before the client heard so. The
// client sees an error from COMMIT although its writes are stored; code
// that retries such a transaction stores them twice.
//
// It reads the frontend protocol (startup, then typed messages) to follow
// each connection's transaction: the statements it parses, binds (by
// prepared statement name) or sends as simple queries since the last
// COMMIT. Use a DSN with sslmode=disable (an encrypted stream cannot be
// read).
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	match string // non-empty: armed for the next commit of a matching transaction
	conns map[net.Conn]struct{}

	dropped atomic.Int64
}

// StartProxy listens on a loopback port in front of dsn's server and
// returns the proxy and dsn rewritten to go through it. The proxy stops
// when the test ends.
func StartProxy(t testing.TB, dsn string) (*Proxy, string) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("pgtest proxy: parse dsn: %v", err)
	}
	target := u.Host
	if u.Port() == "" {
		target = net.JoinHostPort(u.Hostname(), "5432")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("pgtest proxy: listen: %v", err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go p.accept()
	t.Cleanup(p.close)
	u.Host = ln.Addr().String()
	return p, u.String()
}

// DropAfterCommit arms the proxy: the next transaction that mentions match
// in one of its statements (a table name, say) and then commits has its
// COMMIT forwarded and answered by the server, and the connection is cut
// before the answer reaches the client. One drop per call.
func (p *Proxy) DropAfterCommit(match string) {
	p.mu.Lock()
	p.match = match
	p.mu.Unlock()
}

// Dropped is how many connections were cut after a commit.
func (p *Proxy) Dropped() int64 { return p.dropped.Load() }

func (p *Proxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		if !p.track(client) || !p.track(server) {
			_ = client.Close()
			_ = server.Close()
			return
		}
		c := &proxyConn{p: p, client: client, server: server, stmts: map[string]string{}}
		go c.upstream()
		go c.downstream()
	}
}

// take disarms the proxy if tx (a transaction's statements) matches.
func (p *Proxy) take(tx string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.match == "" || !strings.Contains(tx, p.match) {
		return false
	}
	p.match = ""
	return true
}

type proxyConn struct {
	p              *Proxy
	client, server net.Conn
	stmts          map[string]string // prepared statement name -> text
	tx             strings.Builder   // statements since the last commit
	// cut is set once the COMMIT to drop has gone to the server: from then
	// on the server's answers are swallowed, and both sides are closed
	// when it reports ready for the next query (the commit is done).
	cut atomic.Bool
}

func (c *proxyConn) closeBoth() {
	_ = c.client.Close()
	_ = c.server.Close()
}

// upstream copies client -> server message by message.
func (c *proxyConn) upstream() {
	defer c.closeBoth()
	// Startup: length-prefixed, no type byte.
	var hdr [4]byte
	if _, err := io.ReadFull(c.client, hdr[:]); err != nil {
		return
	}
	n := int(binary.BigEndian.Uint32(hdr[:]))
	if n < 4 {
		return
	}
	body := make([]byte, n-4)
	if _, err := io.ReadFull(c.client, body); err != nil {
		return
	}
	if _, err := c.server.Write(append(hdr[:], body...)); err != nil {
		return
	}
	for {
		var h [5]byte
		if _, err := io.ReadFull(c.client, h[:]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint32(h[1:]))
		if n < 4 {
			return
		}
		body := make([]byte, n-4)
		if _, err := io.ReadFull(c.client, body); err != nil {
			return
		}
		drop := c.observe(h[0], body)
		if drop {
			c.cut.Store(true)
		}
		if _, err := c.server.Write(append(h[:], body...)); err != nil {
			return
		}
	}
}

// observe follows the transaction's statements and reports whether this
// message is the COMMIT to drop.
func (c *proxyConn) observe(typ byte, body []byte) bool {
	cstr := func(b []byte) (string, []byte) {
		i := bytes.IndexByte(b, 0)
		if i < 0 {
			return string(b), nil
		}
		return string(b[:i]), b[i+1:]
	}
	switch typ {
	case 'Q': // simple query
		q, _ := cstr(body)
		if strings.EqualFold(strings.TrimSpace(q), "commit") {
			tx := c.tx.String()
			c.tx.Reset()
			return c.p.take(tx)
		}
		c.tx.WriteString(q)
		c.tx.WriteByte('\n')
	case 'P': // parse: name, query
		name, rest := cstr(body)
		q, _ := cstr(rest)
		if name != "" {
			c.stmts[name] = q
		}
		c.tx.WriteString(q)
		c.tx.WriteByte('\n')
	case 'B': // bind: portal, statement name
		_, rest := cstr(body)
		name, _ := cstr(rest)
		if q, ok := c.stmts[name]; ok {
			c.tx.WriteString(q)
			c.tx.WriteByte('\n')
		}
	}
	return false
}

// downstream copies server -> client message by message, swallowing the
// answers to a COMMIT being dropped.
func (c *proxyConn) downstream() {
	defer c.closeBoth()
	for {
		var h [5]byte
		if _, err := io.ReadFull(c.server, h[:]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint32(h[1:]))
		if n < 4 {
			return
		}
		body := make([]byte, n-4)
		if _, err := io.ReadFull(c.server, body); err != nil {
			return
		}
		if c.cut.Load() {
			if h[0] == 'Z' { // ready for query: the commit is over
				c.p.dropped.Add(1)
				return
			}
			continue
		}
		if _, err := c.client.Write(append(h[:], body...)); err != nil {
			return
		}
	}
}
