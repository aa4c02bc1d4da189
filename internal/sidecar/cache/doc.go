// Package cache is the per-pod cache behind the Workers Cache API (caches.default,
// caches.open): workerd's cacheApiOutbound sends it GET with Cache-Control:
// only-if-cached for match, PUT with the serialized response for put, PURGE for delete
// (workerd src/workerd/api/cache.c++), the cache's name in CF-Cache-Namespace and the
// full URL as the request target (HTTP proxy style). Answers carry CF-Cache-Status HIT
// or MISS. It applies Cloudflare's caching rules (policy.go) and keeps entries within
// a memory budget (small entries) and a disk budget (the rest, under its directory),
// evicting the least recently used (docs/cache.md).
package cache
