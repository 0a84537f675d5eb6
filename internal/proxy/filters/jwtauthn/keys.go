package jwtauthn

import (
	"bytes"
	"context"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/portico-dev/portico/internal/proxy/filter"
)

// Bounds of fetching a key set.
const (
	// refetchInterval is the least time between two fetches for an unknown key
	// id: tokens with made-up key ids must not make the proxy hammer the issuer.
	refetchInterval = 5 * time.Second
	// failureBackoff is how long a failed fetch answers for the fetches after
	// it, so that an unreachable key set server costs one attempt, not one per
	// request.
	failureBackoff = time.Second
	// maxKeySetBytes bounds a key set's size.
	maxKeySetBytes = 1 << 20
)

// keySet is a provider's remote key set, fetched on first use and kept for
// cacheDuration. One fetch runs at a time; requests arriving meanwhile wait
// for it.
type keySet struct {
	uri, cluster  string
	timeout       time.Duration
	cacheDuration time.Duration
	// static key sets (local_jwks) are given once and never fetched.
	static bool

	mu        sync.Mutex
	keys      *jose.JSONWebKeySet
	gen       uint64    // counts the fetches that changed keys
	expires   time.Time // when keys must be fetched again
	fetchedAt time.Time
	failedAt  time.Time
	failure   error
	inflight  chan struct{} // closed when the running fetch ends
}

// get returns the key set and its generation, fetching it when it has
// expired, or when refresh asks for it (an unknown key id) and the last fetch
// is old enough.
func (k *keySet) get(s *filter.Stream, refresh bool) (*jose.JSONWebKeySet, uint64, error) {
	if k.static {
		return k.keys, k.gen, nil
	}
	for {
		k.mu.Lock()
		now := time.Now()
		fresh := k.keys != nil && now.Before(k.expires)
		if fresh && (!refresh || now.Sub(k.fetchedAt) < refetchInterval) {
			keys, gen := k.keys, k.gen
			k.mu.Unlock()
			return keys, gen, nil
		}
		if k.failure != nil && now.Sub(k.failedAt) < failureBackoff {
			keys, gen, err := k.keys, k.gen, k.failure
			k.mu.Unlock()
			if fresh {
				return keys, gen, nil
			}
			return nil, 0, err
		}
		if wait := k.inflight; wait != nil {
			k.mu.Unlock()
			select {
			case <-wait:
				refresh = false // that fetch was the refresh
				continue
			case <-s.Context().Done():
				return nil, 0, s.Context().Err()
			}
		}
		done := make(chan struct{})
		k.inflight = done
		k.mu.Unlock()

		keys, err := k.fetch(s.Env)
		k.mu.Lock()
		k.inflight = nil
		close(done)
		if err != nil {
			k.failure, k.failedAt = err, time.Now()
			stale, gen := k.keys, k.gen
			k.mu.Unlock()
			if s.Env != nil && s.Env.Log != nil {
				s.Env.Log.Warn("jwt_authn: fetching the key set failed; tokens cannot be verified", "uri", k.uri, "cluster", k.cluster, "error", err)
			}
			if fresh {
				return stale, gen, nil
			}
			return nil, 0, err
		}
		if k.keys == nil || !sameKeys(k.keys, keys) {
			k.gen++
		}
		k.keys, k.failure = keys, nil
		k.fetchedAt = time.Now()
		k.expires = k.fetchedAt.Add(k.cacheDuration)
		gen := k.gen
		k.mu.Unlock()
		return keys, gen, nil
	}
}

// fetch gets the key set from its cluster. It does not use the request's
// context: waiting requests share the fetch, and one client leaving must not
// fail it for the others.
func (k *keySet) fetch(env *filter.Env) (*jose.JSONWebKeySet, error) {
	if env == nil || env.Upstreams == nil {
		return nil, errors.New("no upstreams to fetch from")
	}
	client, err := env.Upstreams.HTTP(k.cluster)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), k.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.uri, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxKeySetBytes+1))
	if err != nil {
		return nil, err
	}
	if len(body) > maxKeySetBytes {
		return nil, fmt.Errorf("the key set is larger than %d bytes", maxKeySetBytes)
	}
	return parseKeySet(body)
}

// parseKeySet parses a JSON Web Key Set, which must hold keys.
func parseKeySet(data []byte) (*jose.JSONWebKeySet, error) {
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("not a JSON Web Key Set: %w", err)
	}
	if len(set.Keys) == 0 {
		return nil, errors.New("the key set has no keys")
	}
	return &set, nil
}

// sameKeys reports whether two key sets hold the same keys, so that a fetch
// returning what the cache has keeps the tokens verified with it.
func sameKeys(a, b *jose.JSONWebKeySet) bool {
	if len(a.Keys) != len(b.Keys) {
		return false
	}
	for i := range a.Keys {
		ta, errA := a.Keys[i].Thumbprint(crypto.SHA256)
		tb, errB := b.Keys[i].Thumbprint(crypto.SHA256)
		if errA != nil || errB != nil || !bytes.Equal(ta, tb) || a.Keys[i].KeyID != b.Keys[i].KeyID || a.Keys[i].Algorithm != b.Keys[i].Algorithm {
			return false
		}
	}
	return true
}
