package apikey_test

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/libs/auth/apikey"
)

func TestGenerate_ShapeHashAndPrefix(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		test bool
		re   *regexp.Regexp
	}{
		{"live key", false, regexp.MustCompile(`^svc_live_[0-9A-Za-z]{43}$`)},
		{"test key", true, regexp.MustCompile(`^svc_test_[0-9A-Za-z]{43}$`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			seen := map[string]bool{}
			for range 200 {
				plain, hash, prefix, err := apikey.Generate(tt.test)
				if err != nil {
					t.Fatal(err)
				}
				if !tt.re.MatchString(plain) {
					t.Fatalf("key %q does not match %s", plain, tt.re)
				}
				if !bytes.Equal(hash, apikey.Hash(plain)) || len(hash) != 32 {
					t.Fatalf("hash is not SHA-256 of the plain key")
				}
				if prefix != plain[:apikey.PrefixLen] || len(prefix) != 13 {
					t.Fatalf("prefix %q, want first 13 chars of %q", prefix, plain)
				}
				if apikey.IsTestKey(plain) != tt.test {
					t.Fatalf("IsTestKey(%q) = %v", plain, !tt.test)
				}
				if seen[plain] {
					t.Fatalf("duplicate key %q", plain)
				}
				seen[plain] = true
			}
		})
	}
}

func TestHash_KnownVector(t *testing.T) {
	t.Parallel()
	// sha256("abc"), so stores written in other languages agree.
	want := []byte{0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40, 0xde, 0x5d, 0xae, 0x22, 0x23,
		0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17, 0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00, 0x15, 0xad}
	if got := apikey.Hash("abc"); !bytes.Equal(got, want) {
		t.Fatalf("Hash(abc) = %x", got)
	}
}

func TestMask(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"svc_live_ab12", "svc_live_ab12••••"},
		{"svc_live_ab12XYZ", "svc_live_ab12••••"},
		{"svc_test_Zz09", "svc_test_Zz09••••"},
	}
	for _, tt := range tests {
		if got := apikey.Mask(tt.in); got != tt.want {
			t.Errorf("Mask(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestKey_RetiredAndRotatingBoundary(t *testing.T) {
	t.Parallel()
	deadline := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	k := apikey.Key{RotationDeadline: &deadline}
	tests := []struct {
		name                  string
		now                   time.Time
		wantRetired, wantRota bool
	}{
		{"one nanosecond before deadline is rotating", deadline.Add(-time.Nanosecond), false, true},
		{"exactly at deadline is retired", deadline, true, false},
		{"after deadline is retired", deadline.Add(time.Second), true, false},
	}
	for _, tt := range tests {
		if got := k.Retired(tt.now); got != tt.wantRetired {
			t.Errorf("%s: Retired = %v", tt.name, got)
		}
		if got := k.Rotating(tt.now); got != tt.wantRota {
			t.Errorf("%s: Rotating = %v", tt.name, got)
		}
	}
	unmarked := apikey.Key{}
	if unmarked.Retired(deadline) || unmarked.Rotating(deadline) {
		t.Error("unmarked key reported as retired or rotating")
	}
}

func TestWithKey_RoundTrip(t *testing.T) {
	t.Parallel()
	if _, ok := apikey.KeyFrom(context.Background()); ok {
		t.Fatal("KeyFrom on empty context reported a key")
	}
	ctx := apikey.WithKey(context.Background(), apikey.Key{ID: 3, ProgramID: 9})
	if k, ok := apikey.KeyFrom(ctx); !ok || k.ID != 3 || k.ProgramID != 9 {
		t.Fatalf("KeyFrom = %+v, %v", k, ok)
	}
}

func TestParse_AcceptsGeneratedKeys(t *testing.T) {
	t.Parallel()
	for _, test := range []bool{false, true} {
		for range 200 {
			plain, hash, prefix, err := apikey.Generate(test)
			if err != nil {
				t.Fatal(err)
			}
			got, err := apikey.Parse(plain)
			if err != nil || got != test {
				t.Fatalf("Parse(generated %v key) = %v, %v", test, got, err)
			}
			ih, ip, it, err := apikey.Import(plain)
			if err != nil || !bytes.Equal(ih, hash) || ip != prefix || it != test {
				t.Fatalf("Import disagrees with Generate: %x %q %v %v", ih, ip, it, err)
			}
		}
	}
}

func TestParse_Format(t *testing.T) {
	t.Parallel()
	body := strings.Repeat("aZ9", 14) + "x" // 43 base62 characters
	tests := []struct {
		name     string
		plain    string
		wantTest bool
		wantErr  bool
	}{
		{"live key", "svc_live_" + body, false, false},
		{"test key", "svc_test_" + body, true, false},
		{"all zeros body", "svc_live_" + strings.Repeat("0", 43), false, false},
		{"body above 2^256 still has the format", "svc_live_" + strings.Repeat("Z", 43), false, false},
		{"empty", "", false, true},
		{"prefix only", "svc_live_", false, true},
		{"unknown kind", "svc_prod_" + body, false, true},
		{"upper-case prefix", "SVC_LIVE_" + body, false, true},
		{"other vendor prefix", "sk_live_" + body, false, true},
		{"body one short", "svc_live_" + body[:42], false, true},
		{"body one long", "svc_test_" + body + "a", false, true},
		{"dash in body", "svc_live_" + body[:42] + "-", false, true},
		{"underscore in body", "svc_live__" + body[1:], false, true},
		{"space in body", "svc_live_" + body[:42] + " ", false, true},
		{"leading space", " svc_live_" + body, false, true},
		{"non-ASCII letter in body", "svc_live_" + body[:41] + "é", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			test, err := apikey.Parse(tt.plain)
			if tt.wantErr {
				if !errors.Is(err, apikey.ErrMalformed) {
					t.Fatalf("Parse(%q) = %v, %v; want ErrMalformed", tt.plain, test, err)
				}
				if tt.plain != "" && strings.Contains(err.Error(), tt.plain) {
					t.Fatalf("error %q repeats the key", err)
				}
				if _, _, _, ierr := apikey.Import(tt.plain); !errors.Is(ierr, apikey.ErrMalformed) {
					t.Fatalf("Import(%q) = %v; want ErrMalformed", tt.plain, ierr)
				}
				return
			}
			if err != nil || test != tt.wantTest {
				t.Fatalf("Parse(%q) = %v, %v; want %v", tt.plain, test, err, tt.wantTest)
			}
			hash, prefix, itest, err := apikey.Import(tt.plain)
			if err != nil || !bytes.Equal(hash, apikey.Hash(tt.plain)) || prefix != tt.plain[:apikey.PrefixLen] || itest != tt.wantTest {
				t.Fatalf("Import(%q) = %x %q %v %v", tt.plain, hash, prefix, itest, err)
			}
		})
	}
}
