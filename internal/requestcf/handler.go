package requestcf

import (
	"encoding/json"
	"net/http"
)

// Handler answers GET <path>?peer=..&connecting=..&forwarded=.. (Request's fields) with
// the Result as JSON, 400 when peer is not an address. A database that fails a
// lookup leaves its fields out; the answer is still 200.
func Handler(c *Config, logf func(format string, a ...any)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		q := r.URL.Query()
		res, err := c.Compute(Request{Peer: q.Get("peer"), ConnectingIP: q.Get("connecting"), ForwardedFor: q.Get("forwarded")})
		if err != nil && res.CF == nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err != nil && logf != nil {
			logf("request-cf: GeoIP lookup of %s: %v", res.ClientIP, err)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(res)
	})
}
