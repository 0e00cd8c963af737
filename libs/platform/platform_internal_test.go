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
