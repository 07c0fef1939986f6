package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/doppio-db/doppio/bench/internal/pgserver"
)

// pgCacheAside is configuration (d): profiles(member text primary key,
// doc jsonb) in a private PostgreSQL, and Redis in front of it the way
// an application does cache-aside by hand: a read tries Redis, and on a
// miss reads PostgreSQL and sets the key with the TTL; an update writes
// PostgreSQL, then deletes the key.
type pgCacheAside struct {
	cfg  config
	pg   *pgserver.Server
	pool *pgxpool.Pool
	rdb  *redis.Client
}

// startPostgres starts a private PostgreSQL under dir and loads every
// profile.
func startPostgres(ctx context.Context, cfg config, dir, redisAddr string) (*pgCacheAside, error) {
	pg, err := pgserver.Start(ctx, pgserver.Config{Dir: dir, Clients: workers, SharedBuffers: "512MB", Logf: cfg.Progress})
	if err != nil {
		return nil, err
	}
	s := &pgCacheAside{cfg: cfg, pg: pg, pool: pg.Pool}
	if _, err := s.pool.Exec(ctx, `CREATE TABLE profiles (member text PRIMARY KEY, doc jsonb NOT NULL)`); err != nil {
		s.stop()
		return nil, fmt.Errorf("postgres: %w", err)
	}
	s.rdb = redis.NewClient(&redis.Options{Addr: redisAddr, PoolSize: workers})
	cfg.Progress("postgres: loading %d profiles", cfg.Docs)
	put := func(ctx context.Context, key string, p profile) error {
		doc, err := json.Marshal(p)
		if err != nil {
			return err
		}
		_, err = s.pool.Exec(ctx, `INSERT INTO profiles VALUES ($1, $2)`, key, doc)
		return err
	}
	if err := load(ctx, cfg, put); err != nil {
		s.stop()
		return nil, err
	}
	if _, err := s.pool.Exec(ctx, `VACUUM ANALYZE profiles`); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

func (s *pgCacheAside) key(member string) string { return "app:profile:" + member }

// Read implements store: Redis, else PostgreSQL and fill Redis.
func (s *pgCacheAside) Read(ctx context.Context, member string) (string, error) {
	doc, err := s.rdb.Get(ctx, s.key(member)).Bytes()
	if err == nil {
		var p profile
		return "redis", json.Unmarshal(doc, &p)
	}
	if !errors.Is(err, redis.Nil) {
		return "", err
	}
	if err := s.pool.QueryRow(ctx, `SELECT doc FROM profiles WHERE member = $1`, member).Scan(&doc); err != nil {
		return "", err
	}
	var p profile
	if err := json.Unmarshal(doc, &p); err != nil {
		return "", err
	}
	return "miss", s.rdb.Set(ctx, s.key(member), doc, s.cfg.TTL).Err()
}

// Update implements store: PostgreSQL, then invalidate.
func (s *pgCacheAside) Update(ctx context.Context, member string, p profile) error {
	doc, err := json.Marshal(p)
	if err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `UPDATE profiles SET doc = $2 WHERE member = $1`, member, doc)
	if err != nil {
		return err
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("update %s: %d rows", member, tag.RowsAffected())
	}
	return s.rdb.Del(ctx, s.key(member)).Err()
}

func (s *pgCacheAside) stop() {
	if s.rdb != nil {
		s.rdb.Close()
	}
	_ = s.pg.Close() // and its pool
}
