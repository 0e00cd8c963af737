package catalogsync

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/svc-dev/svc/libs/auth/apikey"
	eventsv1 "github.com/svc-dev/svc/proto/svc/events/v1"
)

// UpsertAPIKey applies a catalog.api_key.upserted event (env) to the
// replica's api_keys table inside tx. Every service that authenticates
// program API keys keeps the same table in its own schema:
//
//	api_keys(id bigint PRIMARY KEY, program_id bigint, key_hash bytea UNIQUE,
//	         test boolean, rotation_marked_at timestamptz, rotation_deadline timestamptz,
//	         revoked boolean, catalog_seq bigint)
//
// An older snapshot (a redelivery, another partition's late event) never
// overwrites a newer one: the row keeps the highest catalog seq.
func UpsertAPIKey(ctx context.Context, tx pgx.Tx, env *eventsv1.Envelope) error {
	var k eventsv1.ApiKey
	if err := proto.Unmarshal(env.GetPayload(), &k); err != nil {
		return fmt.Errorf("decode api key event %s: %w", env.GetId(), err)
	}
	_, err := tx.Exec(ctx, `INSERT INTO api_keys (id, program_id, key_hash, test, rotation_marked_at, rotation_deadline, revoked, catalog_seq)
		VALUES ($1,$2,$3,$4,$5,$6,$7,$8)
		ON CONFLICT (id) DO UPDATE SET rotation_marked_at = EXCLUDED.rotation_marked_at,
			rotation_deadline = EXCLUDED.rotation_deadline, revoked = EXCLUDED.revoked, catalog_seq = EXCLUDED.catalog_seq
		WHERE api_keys.catalog_seq < EXCLUDED.catalog_seq`,
		k.GetId(), k.GetProgramId(), k.GetKeyHash(), k.GetTest(), optTime(k.GetRotationMarkedAt()),
		optTime(k.GetRotationDeadline()), k.GetRevoked(), env.GetSeq())
	if err != nil {
		return fmt.Errorf("upsert api key %d: %w", k.GetId(), err)
	}
	return nil
}

func optTime(t *timestamppb.Timestamp) *time.Time {
	if t == nil {
		return nil
	}
	v := t.AsTime()
	return &v
}

// Querier is what LookupAPIKey reads through (a pool, a connection, a
// transaction).
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// LookupAPIKey is apikey.Store.LookupKeyByHash over the replica's api_keys
// table (the one UpsertAPIKey keeps): apikey.ErrKeyNotFound when no key
// has the hash.
func LookupAPIKey(ctx context.Context, q Querier, hash []byte) (apikey.Key, error) {
	var k apikey.Key
	err := q.QueryRow(ctx, `SELECT id, program_id, test, rotation_marked_at, rotation_deadline, revoked
		FROM api_keys WHERE key_hash = $1`, hash).
		Scan(&k.ID, &k.ProgramID, &k.Test, &k.RotationMarkedAt, &k.RotationDeadline, &k.Revoked)
	if errors.Is(err, pgx.ErrNoRows) {
		return apikey.Key{}, apikey.ErrKeyNotFound
	}
	if err != nil {
		return apikey.Key{}, fmt.Errorf("look up api key: %w", err)
	}
	return k, nil
}

// Keys is apikey.Store over a replica's api_keys table, cached: a sale or
// refund authenticates without a round trip once its key is known, and a
// key revoked or rotated in the catalog is seen as soon as the consumer's
// change commits (Cache). Run must be running for it to cache.
type Keys struct {
	pool  *pgxpool.Pool
	cache *Cache[string, keyEntry]
}

type keyEntry struct {
	found bool
	key   apikey.Key
}

// NewKeys returns the cached key store of the replica in schema.
func NewKeys(pool *pgxpool.Pool, schema string, logger *slog.Logger) (*Keys, error) {
	c, err := NewCache[string, keyEntry](pool, CacheConfig{Schema: schema}, logger)
	if err != nil {
		return nil, err
	}
	return &Keys{pool: pool, cache: c}, nil
}

// LookupKeyByHash is LookupAPIKey through the cache (an unknown hash is
// cached too, within the cache's size).
func (k *Keys) LookupKeyByHash(ctx context.Context, hash []byte) (apikey.Key, error) {
	e, err := k.cache.Get(ctx, string(hash), func(ctx context.Context) (keyEntry, error) {
		key, err := LookupAPIKey(ctx, k.pool, hash)
		if errors.Is(err, apikey.ErrKeyNotFound) {
			return keyEntry{}, nil
		}
		return keyEntry{found: err == nil, key: key}, err
	})
	if err != nil {
		return apikey.Key{}, err
	}
	if !e.found {
		return apikey.Key{}, apikey.ErrKeyNotFound
	}
	return e.key, nil
}

// Run keeps the cache's listener going until ctx ends.
func (k *Keys) Run(ctx context.Context) error { return k.cache.Run(ctx) }
