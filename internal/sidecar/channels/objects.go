package channels

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
)

// DefaultMaxObjects is how many object instances may hold channel state (a registry)
// in one sidecar at once (Options.MaxObjects). A registry lives while it has a
// subscription (collected ones included until their lease lapses) and is freed
// after; a subscribe that would open one more is refused with OBJECT_LIMIT. One
// registry with one subscription takes well under 2 KiB, so the idle cost of the
// cap is under 20 MiB.
const DefaultMaxObjects = 10000

// MaxKeyBytes bounds the namespace and the object id of a Key (a DurableObjectNamespace
// name has at most 253 characters, an object id 64 hex digits).
const MaxKeyBytes = 256

// objectLimitSource is the Source of OBJECT_LIMIT and of key length errors.
const objectLimitSource = "project decision, docs/channels.md: registries per sidecar (sidecar memory)"

// CodeObjectLimit: subscribing would give channel state to object MaxObjects+1 of this
// sidecar.
const CodeObjectLimit Code = "OBJECT_LIMIT"

// Objects is the number of object instances holding a registry.
func (m *Manager) Objects() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.objects)
}

// tokenFor is object k's instanceToken in this run: 13 characters of a keyed hash of k
// under a random per-run key, in the form of a random UUID's first 13 characters. The
// same object gets the same token when its registry is freed and opened again, so a
// handle of a freed registry is SUBSCRIPTION_GONE rather than UNKNOWN_HANDLE.
func (m *Manager) tokenFor(k Key) string {
	mac := hmac.New(sha256.New, m.tokenKey[:])
	mac.Write([]byte(k.Namespace))
	mac.Write([]byte{0})
	mac.Write([]byte(k.Object))
	h := hex.EncodeToString(mac.Sum(nil)[:6])
	return h[:8] + "-" + h[8:]
}

func (m *Manager) validateKey(k Key) *Error {
	if k.Namespace == "" || k.Object == "" || len(k.Namespace) > MaxKeyBytes || len(k.Object) > MaxKeyBytes {
		e := newError(http.StatusBadRequest, CodeInvalidArgument,
			"namespace and object id must be 1..%d bytes, got %d and %d", MaxKeyBytes, len(k.Namespace), len(k.Object))
		e.Limit, e.Source = MaxKeyBytes, objectLimitSource
		return e
	}
	return nil
}

// openLocked returns k's registry, opening it when create is set and the cap allows.
// Called with m.mu held.
func (m *Manager) openLocked(k Key, create bool) (*registry, *Error) {
	r := m.objects[k]
	if r != nil || !create {
		return r, nil
	}
	if err := m.validateKey(k); err != nil {
		return nil, err
	}
	if len(m.objects) >= m.maxObjects {
		return nil, limitError(CodeObjectLimit, int64(m.maxObjects), objectLimitSource,
			"this sidecar already holds channel state for %d Durable Object instances (limit %d); object %s was not subscribed — retry after idle subscriptions lapse (lease %s)",
			len(m.objects), m.maxObjects, k, m.lease)
	}
	token := m.tokenFor(k)
	r = &registry{key: k, token: token, channels: map[string]*channel{}, readers: map[uint64]*reader{}}
	m.objects[k] = r
	m.tokens[token] = k
	m.mapSize = max(m.mapSize, len(m.objects))
	m.metrics.objects(1)
	return r, nil
}

// freeIfIdleLocked frees r once it holds no subscription. Called with r.mu held (never
// m.mu: the order is r.mu, then m.mu).
func (m *Manager) freeIfIdleLocked(r *registry) {
	if r.freed || len(r.readers) > 0 || len(r.channels) > 0 {
		return
	}
	r.freed = true
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.objects[r.key] == r {
		delete(m.objects, r.key)
		m.metrics.objects(-1)
	}
	if m.tokens[r.token] == r.key {
		delete(m.tokens, r.token)
	}
}

// shrinkMaps copies the maps once they hold under a quarter of their largest size since
// the last copy (Go maps keep their room after deletes). Called with m.mu held.
func (m *Manager) shrinkMaps() {
	if m.mapSize < 64 || len(m.objects) >= m.mapSize/4 {
		return
	}
	objects, tokens := make(map[Key]*registry, len(m.objects)), make(map[string]Key, len(m.tokens))
	for k, r := range m.objects {
		objects[k] = r
	}
	for t, k := range m.tokens {
		tokens[t] = k
	}
	m.objects, m.tokens, m.mapSize = objects, tokens, len(objects)
}
