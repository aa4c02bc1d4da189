package render_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// dataSpecs are the KV namespace and D1 database (two migrations, out of string order)
// of the data conformance tests.
func dataSpecs() (kv, d1 render.DataHost) {
	return render.DataHost{Kind: render.DataKV, Namespace: "default", Name: "store"},
		render.DataHost{Kind: render.DataD1, Namespace: "default", Name: "db", Migrations: []render.Migration{
			{Name: "10_more.sql", SQL: "INSERT INTO notes (body) VALUES ('two');"},
			{Name: "9_init.sql", SQL: "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT);\nINSERT INTO notes (body) VALUES ('one');"},
		}}
}

func refOf(h render.DataHost) render.DataRef { return render.DataRef{Kind: h.Kind, Name: h.Name} }

// TestDataBindingsMatchBuiltIn: every data conformance case answers the same, value and
// error text, through the pods as rendered (the client Worker reaches each store's host
// pod over its gateway) as with the pinned workerd's own built-in store in the client's
// process (its bundled kv.js or d1.js bound directly, no gateway, no second process).
// A difference is ours: the gateway, the rendering or the host pod.
func TestDataBindingsMatchBuiltIn(t *testing.T) {
	bin := testenv.WorkerdBinary(t)
	kvSpec, d1Spec := dataSpecs()
	gateway := func(h render.DataHost) string {
		return startDataHost(t, bin, t.TempDir(), h).Addrs[podcontract.GatewaySocket]
	}
	pods := startDataClient(t, bin, map[render.DataRef]string{refOf(kvSpec): gateway(kvSpec), refOf(d1Spec): gateway(d1Spec)})
	viaPods := runDataCases(t, pods.Addrs[podcontract.HTTPSocket])
	for _, pair := range [][2]render.DataHost{{kvSpec, d1Spec}, {d1Spec, kvSpec}} {
		hosted, other := pair[0], pair[1]
		builtIn := runDataCases(t, startClientHosting(t, bin, hosted, other, gateway(other)))
		prefix := string(hosted.Kind) + "-"
		for _, tc := range dataCases {
			if !strings.HasPrefix(tc.name, prefix) {
				continue
			}
			p, b := viaPods[tc.name].timeless(), builtIn[tc.name].timeless()
			if string(p.Value) != string(b.Value) || p.Error != b.Error {
				t.Errorf("%s: through the pods %s %q, workerd's built-in %s %s %q", tc.name, p.Value, p.Error, hosted.Kind, b.Value, b.Error)
			}
		}
	}
}

// unixSeconds is a time in seconds since the epoch in an answer (kv-expiration-past
// names the expiration it refused, computed from the clock).
var unixSeconds = regexp.MustCompile(`\b1[0-9]{9}\b`)

// timeless is r with its clock readings masked.
func (r caseResult) timeless() caseResult {
	return caseResult{Value: unixSeconds.ReplaceAll(r.Value, []byte("<unix time>")), Error: unixSeconds.ReplaceAllString(r.Error, "<unix time>")}
}

// runDataCases runs every data conformance case, in order, against the client at addr.
func runDataCases(t *testing.T, addr string) map[string]caseResult {
	t.Helper()
	out := map[string]caseResult{}
	for _, tc := range dataCases {
		out[tc.name] = runCase(t, addr, tc.name)
	}
	return out
}

// startClientHosting starts the client Worker with store hosted in its own process (as
// a Queue's consumer pod hosts its queue) and other reached at otherGateway; it returns
// the client's HTTP address.
func startClientHosting(t *testing.T, bin string, hosted, other render.DataHost, otherGateway string) string {
	t.Helper()
	w := dataWorker(t, "conformance.js")
	stores, externals := dataBindings(w, map[render.DataRef]string{refOf(hosted): "", refOf(other): otherGateway})
	delete(externals, string(hosted.Kind)+":"+hosted.Name)
	l := startHost(t, bin, t.TempDir(), render.Input{Worker: w, DataHost: &hosted, DataStores: stores}, externals)
	return l.Addrs[podcontract.HTTPSocket]
}
