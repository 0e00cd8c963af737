package apikey_test

import (
	"bytes"
	"context"
	"regexp"
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
