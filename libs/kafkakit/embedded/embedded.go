// Package embedded runs an in-process Kafka-compatible broker (kfake) on a
// fixed address, for the local stack runner: one process, no JVM, real
// Kafka wire protocol, so the services run unchanged against it.
package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Options configures Start. The zero value is an in-memory broker with
// kfake's default of 10 partitions per topic created with the broker default.
type Options struct {
	// DataDir, when set, persists topics, records and committed offsets
	// there, and reloads them on the next Start.
	DataDir string
	// SyncWrites fsyncs every produced batch (slower; survives a machine
	// crash, not only a process restart). Only with DataDir.
	SyncWrites bool
	// DefaultPartitions for topics created without a partition count; 0
	// keeps kfake's default (10).
	DefaultPartitions int
	// Logger receives the broker's warnings and errors; nil discards them.
	Logger *slog.Logger
}

// Start listens on addr ("127.0.0.1:9092"; the host is also what the broker
// advertises to clients, so use an address clients can reach) and serves
// until stop is called. Topics are not auto-created, as in production.
func Start(addr string, opt Options) (stop func(), err error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("embedded kafka address %q: %w", addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("embedded kafka port %q: %w", portStr, err)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		return nil, errors.New("embedded kafka: give a concrete host (it is advertised to clients), e.g. 127.0.0.1:9092")
	}

	opts := []kfake.Opt{
		kfake.Ports(port),
		// kfake always asks for 127.0.0.1:<port>; listen on the host we were
		// given instead.
		kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			return net.Listen(network, addr)
		}),
	}
	if opt.DataDir != "" {
		opts = append(opts, kfake.DataDir(opt.DataDir))
		if opt.SyncWrites {
			opts = append(opts, kfake.SyncWrites())
		}
	}
	if opt.DefaultPartitions > 0 {
		opts = append(opts, kfake.DefaultNumPartitions(opt.DefaultPartitions))
	}
	if opt.Logger != nil {
		opts = append(opts, kfake.WithLogger(slogAdapter{opt.Logger}))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("start embedded kafka on %s: %w", addr, err)
	}
	return c.Close, nil
}

type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Logf(level kfake.LogLevel, format string, args ...any) {
	var lvl slog.Level
	switch level {
	case kfake.LogLevelError:
		lvl = slog.LevelError
	case kfake.LogLevelWarn:
		lvl = slog.LevelWarn
	default:
		// kfake logs every request at info: far too chatty for a dev stack.
		return
	}
	a.l.Log(context.Background(), lvl, "kfake: "+fmt.Sprintf(format, args...), "component", "kafka")
}
