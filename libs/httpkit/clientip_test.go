package httpkit_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/svc-dev/svc/libs/httpkit"
)

func TestNewIPResolverParsesList(t *testing.T) {
	tests := []struct {
		name    string
		list    string
		wantErr bool
		trusted []string
		not     []string
	}{
		{"empty trusts nothing", "", false, nil, []string{"127.0.0.1", "::1"}},
		{"cidrs and bare ips", " 10.0.0.0/8 , 127.0.0.1,::1/128 ", false, []string{"10.1.2.3", "127.0.0.1", "::1"}, []string{"11.0.0.1", "127.0.0.2", "::2"}},
		{"unmasked cidr is masked", "192.168.1.7/24", false, []string{"192.168.1.200"}, []string{"192.168.2.1"}},
		{"ipv4-mapped entry matches ipv4", "::ffff:10.0.0.0/104", false, []string{"10.9.9.9", "::ffff:10.9.9.9"}, []string{"11.0.0.1"}},
		{"ipv4 entry matches mapped peer", "10.0.0.1", false, []string{"::ffff:10.0.0.1"}, nil},
		{"trailing comma ignored", "10.0.0.1,", false, []string{"10.0.0.1"}, nil},
		{"bad cidr", "10.0.0.0/33", true, nil, nil},
		{"bad ip", "10.0.0.256", true, nil, nil},
		{"hostname", "proxy.internal", true, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := httpkit.NewIPResolver(tt.list)
			if tt.wantErr {
				if err == nil {
					t.Fatal("want error, got nil")
				}
				return
			}
			if err != nil {
				t.Fatalf("NewIPResolver: %v", err)
			}
			for _, s := range tt.trusted {
				if !res.Trusted(netip.MustParseAddr(s)) {
					t.Errorf("%s not trusted", s)
				}
			}
			for _, s := range tt.not {
				if res.Trusted(netip.MustParseAddr(s)) {
					t.Errorf("%s trusted", s)
				}
			}
		})
	}
}

func TestClientIP(t *testing.T) {
	res, err := httpkit.NewIPResolver("10.0.0.0/8,fd00::/8")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		remote string
		xff    []string
		want   string
	}{
		{"untrusted peer, no header", "203.0.113.5:4000", nil, "203.0.113.5"},
		{"untrusted peer ignores header", "203.0.113.5:4000", []string{"198.51.100.1"}, "203.0.113.5"},
		{"trusted peer, no header", "10.0.0.1:4000", nil, "10.0.0.1"},
		{"trusted peer, one hop", "10.0.0.1:4000", []string{"198.51.100.1"}, "198.51.100.1"},
		{"spoofed left entry not believed", "10.0.0.1:4000", []string{"1.1.1.1, 198.51.100.1"}, "198.51.100.1"},
		{"trusted hops skipped", "10.0.0.1:4000", []string{"198.51.100.1, 10.0.0.7, 10.0.0.8"}, "198.51.100.1"},
		{"all hops trusted gives leftmost", "10.0.0.1:4000", []string{"10.0.0.5, 10.0.0.6"}, "10.0.0.5"},
		{"several header lines joined in order", "10.0.0.1:4000", []string{"198.51.100.1", "10.0.0.9"}, "198.51.100.1"},
		{"entry with port", "10.0.0.1:4000", []string{"198.51.100.1:5555"}, "198.51.100.1"},
		{"ipv6 entry", "10.0.0.1:4000", []string{"2001:db8::1"}, "2001:db8::1"},
		{"bracketed ipv6 with port", "10.0.0.1:4000", []string{"[2001:db8::1]:443"}, "2001:db8::1"},
		{"ipv6 trusted peer", "[fd00::1]:4000", []string{"198.51.100.1"}, "198.51.100.1"},
		{"mapped ipv4 peer unmapped", "[::ffff:203.0.113.5]:4000", nil, "203.0.113.5"},
		{"empty entries skipped", "10.0.0.1:4000", []string{"198.51.100.1, ,"}, "198.51.100.1"},
		{"malformed rightmost falls back to peer", "10.0.0.1:4000", []string{"198.51.100.1, garbage"}, "10.0.0.1"},
		{"malformed after trusted hop falls back to peer", "10.0.0.1:4000", []string{"unknown, 10.0.0.7"}, "10.0.0.1"},
		{"malformed beyond the client is never read", "10.0.0.1:4000", []string{"garbage, 198.51.100.1"}, "198.51.100.1"},
		{"remote addr without port", "203.0.113.5", nil, "203.0.113.5"},
		{"unparseable remote addr", "not-an-addr", nil, "invalid IP"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = tt.remote
			for _, v := range tt.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := res.ClientIP(r).String(); got != tt.want {
				t.Errorf("ClientIP = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestClientIPMiddlewareStoresAddress(t *testing.T) {
	res, err := httpkit.NewIPResolver("127.0.0.1/32")
	if err != nil {
		t.Fatal(err)
	}
	var got netip.Addr
	var ok bool
	h := res.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok = httpkit.ClientIPFrom(r.Context())
	}))
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "127.0.0.1:1234"
	r.Header.Set("X-Forwarded-For", "198.51.100.9")
	h.ServeHTTP(httptest.NewRecorder(), r)
	if !ok || got.String() != "198.51.100.9" {
		t.Errorf("ClientIPFrom = %v, %v; want 198.51.100.9, true", got, ok)
	}
	if _, ok := httpkit.ClientIPFrom(t.Context()); ok {
		t.Error("ClientIPFrom outside middleware reported ok")
	}
}
