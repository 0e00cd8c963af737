package platform

import (
	"testing"
	"time"
)

func TestWriteTimeoutDefaultsWhenUnset(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		set  time.Duration
		want time.Duration
	}{
		{name: "unset", set: 0, want: DefaultHTTPWriteTimeout},
		{name: "set", set: 70 * time.Second, want: 70 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (Spec{HTTPWriteTimeout: tt.set}).writeTimeout(); got != tt.want {
				t.Fatalf("writeTimeout() = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestIsOpsRoute(t *testing.T) {
	t.Parallel()
	for pattern, want := range map[string]bool{
		"GET /admin/v1/programs":             true,
		"POST /internal/v1/attributions":     true,
		"/admin/v1/":                         true,
		"GET example.com/admin/v1/x":         true,
		"GET  /internal/v1/x":                true,
		"GET /api/v1/programs/{id}/settings": false,
		"POST /api/v1/track/click":           false,
		"GET /administrator":                 false,
		"GET /api/v1/admin/v1/x":             false,
		"GET /svc.js":                        false,
	} {
		if got := isOpsRoute(pattern); got != want {
			t.Errorf("isOpsRoute(%q) = %v, want %v", pattern, got, want)
		}
	}
}
