package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	localServer = "postgres://postgres@localhost:5432/postgres?sslmode=disable"
	devDatabase = "svc"
	privatePort = "55432"
)

// resolvePostgres finds a database: DATABASE_URL, else a server on
// localhost:5432 (using database "svc" on it), else a private cluster made
// with initdb under dataDir. It returns the DSN and a stop function.
func resolvePostgres(ctx context.Context, out io.Writer, dataDir string) (string, func(), error) {
	noop := func() {}
	if dsn := os.Getenv("DATABASE_URL"); dsn != "" {
		if err := ping(ctx, dsn); err != nil {
			return "", noop, fmt.Errorf("DATABASE_URL does not answer: %w", err)
		}
		fmt.Fprintln(out, "postgres  DATABASE_URL")
		return dsn, noop, nil
	}
	if ping(ctx, localServer) == nil {
		dsn, err := ensureDatabase(ctx, localServer, "postgres://postgres@localhost:5432/"+devDatabase+"?sslmode=disable")
		if err != nil {
			return "", noop, err
		}
		fmt.Fprintf(out, "postgres  localhost:5432, database %q\n", devDatabase)
		return dsn, noop, nil
	}
	bin, ok := postgresBinDir()
	if !ok {
		return "", noop, errors.New("no Postgres found: set DATABASE_URL, start a server on localhost:5432, or install the postgresql package (apt-get install postgresql)")
	}
	return privateCluster(ctx, out, bin, dataDir)
}

func ping(ctx context.Context, dsn string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.Ping(ctx)
}

// ensureDatabase creates the dev database on the server if it is missing.
func ensureDatabase(ctx context.Context, adminDSN, dsn string) (string, error) {
	conn, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, devDatabase).Scan(&exists); err != nil {
		return "", fmt.Errorf("look up database %s: %w", devDatabase, err)
	}
	if !exists {
		if _, err := conn.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{devDatabase}.Sanitize()); err != nil {
			return "", fmt.Errorf("create database %s: %w", devDatabase, err)
		}
	}
	return dsn, nil
}

// postgresBinDir finds initdb and pg_ctl: on PATH, or in Debian's
// versioned directory.
func postgresBinDir() (string, bool) {
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), true
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, true
		}
	}
	return "", false
}

// privateCluster creates (once) and starts a cluster in dataDir/pg on a
// loopback port. initdb refuses to run as root, so as root the cluster
// belongs to the postgres user.
func privateCluster(ctx context.Context, out io.Writer, bin, dataDir string) (string, func(), error) {
	abs, err := filepath.Abs(filepath.Join(dataDir, "pg"))
	if err != nil {
		return "", func() {}, err
	}
	sockDir := filepath.Join(filepath.Dir(abs), "pg-socket")
	asUser := func(name string, args ...string) *exec.Cmd {
		if u, err := user.Current(); err == nil && u.Uid == "0" {
			return exec.CommandContext(ctx, "runuser", append([]string{"-u", "postgres", "--", filepath.Join(bin, name)}, args...)...)
		}
		return exec.CommandContext(ctx, filepath.Join(bin, name), args...)
	}
	if err := os.MkdirAll(sockDir, 0o777); err != nil {
		return "", func() {}, err
	}
	_ = os.Chmod(sockDir, 0o777)
	if _, err := os.Stat(filepath.Join(abs, "PG_VERSION")); err != nil {
		if err := os.MkdirAll(abs, 0o700); err != nil {
			return "", func() {}, err
		}
		if u, err := user.Current(); err == nil && u.Uid == "0" {
			if out, err := exec.CommandContext(ctx, "chown", "-R", "postgres:postgres", abs).CombinedOutput(); err != nil {
				return "", func() {}, fmt.Errorf("chown %s: %v: %s", abs, err, out)
			}
		}
		fmt.Fprintf(out, "postgres  creating a private cluster in %s\n", abs)
		if b, err := asUser("initdb", "-D", abs, "-U", "postgres", "--auth=trust", "-E", "UTF8").CombinedOutput(); err != nil {
			return "", func() {}, fmt.Errorf("initdb: %v: %s", err, b)
		}
	}
	logFile := filepath.Join(sockDir, "postgres.log")
	if b, err := asUser("pg_ctl", "-D", abs, "-l", logFile, "-w", "-o",
		"-p "+privatePort+" -k "+sockDir+" -c listen_addresses=127.0.0.1", "start").CombinedOutput(); err != nil {
		return "", func() {}, fmt.Errorf("start private Postgres: %v: %s (log: %s)", err, b, logFile)
	}
	stop := func() { _ = asUser("pg_ctl", "-D", abs, "-m", "fast", "stop").Run() }
	admin := "postgres://postgres@127.0.0.1:" + privatePort + "/postgres?sslmode=disable"
	dsn, err := ensureDatabase(ctx, admin, "postgres://postgres@127.0.0.1:"+privatePort+"/"+devDatabase+"?sslmode=disable")
	if err != nil {
		stop()
		return "", func() {}, err
	}
	fmt.Fprintf(out, "postgres  private cluster on 127.0.0.1:%s\n", privatePort)
	return dsn, stop, nil
}
