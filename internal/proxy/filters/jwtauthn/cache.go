package jwtauthn

import (
	"sync"
	"time"
)

// maxVerifiedTokens bounds a provider's cache of verified tokens.
const maxVerifiedTokens = 1024

// verifiedTokens remembers tokens whose signature, issuer and audiences a
// provider verified, with the key set generation that verified them: a client
// sends the same token on every request, and a signature check costs more
// than the rest of the request path. Time limits are checked on every request;
// a new key set (a rotation may have removed the key) invalidates the entries.
type verifiedTokens struct {
	mu      sync.Mutex
	entries map[string]verifiedToken
}

type verifiedToken struct {
	gen               uint64
	expiry, notBefore time.Time // zero: the claim is absent
	hasExpiry, hasNBF bool
}

// lookup returns the token's entry when it was verified with key set gen.
func (c *verifiedTokens) lookup(token string, gen uint64) (verifiedToken, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.entries[token]
	return v, ok && v.gen == gen
}

// add remembers a verified token; when the cache is full an entry is dropped
// (map order: an arbitrary one), so that no client can grow it.
func (c *verifiedTokens) add(token string, v verifiedToken) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = make(map[string]verifiedToken)
	}
	if len(c.entries) >= maxVerifiedTokens {
		for k := range c.entries {
			delete(c.entries, k)
			break
		}
	}
	c.entries[token] = v
}
