package cache

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Pages the caching rules come from.
const (
	// DocCacheAPI: the headers put() honours, Set-Cookie never cached.
	DocCacheAPI = "https://developers.cloudflare.com/workers/runtime-apis/cache/"
	// DocCacheControl: the Cache-Control directives, and that Vary is not considered
	// except Vary: Accept-Encoding.
	DocCacheControl = "https://developers.cloudflare.com/cache/concepts/cache-control/"
	// DocEdgeTTL: the TTL of a response without Cache-Control directives, by status.
	DocEdgeTTL = "https://developers.cloudflare.com/cache/how-to/configure-cache-status-code/#edge-ttl"
)

// defaultTTL is the edge TTL of a response whose headers set none (DocEdgeTTL); a
// status not listed is not cached.
var defaultTTL = map[int]time.Duration{
	200: 120 * time.Minute, 206: 120 * time.Minute, 301: 120 * time.Minute,
	302: 20 * time.Minute, 303: 20 * time.Minute,
	404: 3 * time.Minute, 410: 3 * time.Minute,
}

// directives are the Cache-Control directives of h, lower-cased; a directive
// without a value maps to "".
func directives(h http.Header) map[string]string {
	out := map[string]string{}
	for _, v := range h.Values("Cache-Control") {
		for _, d := range strings.Split(v, ",") {
			name, val, _ := strings.Cut(strings.TrimSpace(d), "=")
			if name = strings.ToLower(strings.TrimSpace(name)); name != "" {
				out[name] = strings.ToLower(strings.Trim(strings.TrimSpace(val), `"`))
			}
		}
	}
	return out
}

// ttl is how long a put response may be served, false when it may not be stored:
// no-store, private and no-cache (nothing here revalidates) are not stored;
// private=Set-Cookie stores the response without its Set-Cookie, any other Set-Cookie
// is never stored (DocCacheAPI); s-maxage wins over max-age, which wins over Expires
// (DocCacheControl); without any, the status's edge TTL (DocEdgeTTL). h may lose its
// Set-Cookie.
func ttl(status int, h http.Header, now time.Time) (time.Duration, bool) {
	cc := directives(h)
	if _, ok := cc["no-store"]; ok {
		return 0, false
	}
	if v, ok := cc["private"]; ok {
		if v != "set-cookie" {
			return 0, false
		}
		h.Del("Set-Cookie")
	}
	if v, ok := cc["no-cache"]; ok && v == "" {
		return 0, false
	}
	if len(h.Values("Set-Cookie")) > 0 {
		return 0, false
	}
	for _, d := range []string{"s-maxage", "max-age"} {
		if v, ok := cc[d]; ok {
			n, err := strconv.ParseInt(v, 10, 64)
			return time.Duration(n) * time.Second, err == nil && n > 0
		}
	}
	if e := h.Get("Expires"); e != "" {
		t, err := http.ParseTime(e)
		return t.Sub(now), err == nil && t.After(now)
	}
	d, ok := defaultTTL[status]
	return d, ok
}

// variesOnEncoding: the one Vary the cache considers is Accept-Encoding (DocCacheControl).
func variesOnEncoding(h http.Header) bool {
	for _, v := range h.Values("Vary") {
		for _, f := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(f), "Accept-Encoding") {
				return true
			}
		}
	}
	return false
}

// notModified reports whether a match request's If-None-Match (weak comparison, RFC
// 9110 section 13.1.2) or, without it, If-Modified-Since holds against the stored
// ETag and Last-Modified: then match answers 304 (DocCacheAPI).
func notModified(req, stored http.Header) bool {
	if inm := req.Get("If-None-Match"); inm != "" {
		etag := strings.TrimPrefix(stored.Get("ETag"), "W/")
		if etag == "" {
			return false
		}
		for _, t := range strings.Split(inm, ",") {
			if t = strings.TrimSpace(t); t == "*" || strings.TrimPrefix(t, "W/") == etag {
				return true
			}
		}
		return false
	}
	ims, err1 := http.ParseTime(req.Get("If-Modified-Since"))
	lm, err2 := http.ParseTime(stored.Get("Last-Modified"))
	return err1 == nil && err2 == nil && !lm.After(ims)
}
