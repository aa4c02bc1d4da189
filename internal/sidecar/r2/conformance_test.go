package r2_test

import (
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"testing"
)

// Pages the expectations come from.
const (
	apiRef    = "https://developers.cloudflare.com/r2/api/workers/workers-api-reference/"
	errCodes  = "https://developers.cloudflare.com/r2/api/error-codes/"
	limitsRef = "https://developers.cloudflare.com/r2/platform/limits/"
	multiRef  = "https://developers.cloudflare.com/r2/api/workers/workers-multipart-usage/"
)

func hexSum(h []byte) string { return hex.EncodeToString(h) }

// TestConformance: every R2 binding method and option through the real workerd and the
// sidecar's gateway against versitygw, each case with the documented behaviour.
func TestConformance(t *testing.T) {
	h := newHarness(t)
	md5Hello := md5.Sum([]byte("hello world"))
	sha := sha256.Sum256([]byte("hello world"))
	etag := hexSum(md5Hello[:])
	put := decode[object](t, h.call("put", "conf/a", "hello world", map[string]any{
		"httpMetadata":   map[string]string{"contentType": "text/plain", "cacheControl": "max-age=60"},
		"customMetadata": map[string]string{"Owner": "alice", "Mixed-Case": "kept"},
	}))
	// apiRef R2Object: etag is the MD5 of a single-part upload, httpEtag the same quoted.
	if put.Key != "conf/a" || put.Size != 11 || put.Etag != etag || put.HTTPEtag != `"`+etag+`"` || put.Checksums["md5"] != etag {
		t.Fatalf("put result %+v, want key conf/a, size 11, etag %s (%s)", put, etag, apiRef)
	}
	up := put.Uploaded
	cases := []struct {
		name, doc string
		method    string
		args      []any
		check     func(t *testing.T, r reply)
	}{
		{"head returns metadata and no body", apiRef, "head", []any{"conf/a"}, func(t *testing.T, r reply) {
			o := decode[object](t, r)
			if o.Body != nil || o.Etag != etag || o.Version != put.Version || o.Uploaded != up ||
				o.HTTPMetadata["contentType"] != "text/plain" || o.HTTPMetadata["cacheControl"] != "max-age=60" ||
				o.CustomMetadata["Owner"] != "alice" || o.CustomMetadata["Mixed-Case"] != "kept" {
				t.Fatalf("head %+v", o)
			}
		}},
		{"head of a missing key is null", apiRef, "head", []any{"conf/missing"}, isNull},
		{"get returns the body and the metadata", apiRef, "get", []any{"conf/a"}, func(t *testing.T, r reply) {
			body("hello world", nil)(t, r)
			if o := decode[object](t, r); o.Etag != etag || o.Version != put.Version || o.Uploaded != up ||
				o.HTTPMetadata["contentType"] != "text/plain" || o.CustomMetadata["Mixed-Case"] != "kept" {
				t.Fatalf("get %+v", o)
			}
		}},
		{"get of a missing key is null", apiRef, "get", []any{"conf/missing"}, isNull},
		{"range offset", apiRef, "get", []any{"conf/a", map[string]any{"range": map[string]int{"offset": 6}}}, body("world", map[string]int64{"offset": 6, "length": 5})},
		{"range offset and length", apiRef, "get", []any{"conf/a", map[string]any{"range": map[string]int{"offset": 0, "length": 5}}}, body("hello", map[string]int64{"offset": 0, "length": 5})},
		{"range suffix", apiRef, "get", []any{"conf/a", map[string]any{"range": map[string]int{"suffix": 5}}}, body("world", map[string]int64{"offset": 6, "length": 5})},
		{"range from a Range header", apiRef, "get", []any{"conf/a", map[string]any{"range": map[string]any{"$headers": map[string]string{"range": "bytes=0-4"}}}}, body("hello", nil)},
		// A Range header of several ranges gets the whole object, as R2 answers it
		// (miniflare's R2 tests, cloudflare/workers-sdk packages/miniflare/test/plugins/r2).
		{"a multi-range Range header gets the whole object", apiRef, "get", []any{"conf/a", map[string]any{"range": map[string]any{"$headers": map[string]string{"range": "bytes=0-1,6-7"}}}}, body("hello world", map[string]int64{"offset": 0, "length": 11})},
		{"range past the end is InvalidRange", errCodes, "get", []any{"conf/a", map[string]any{"range": map[string]int{"offset": 20}}}, throws("get: The requested range is not satisfiable (10039)")},
		{"onlyIf etagMatches holds", apiRef, "get", []any{"conf/a", map[string]any{"onlyIf": map[string]string{"etagMatches": etag}}}, body("hello world", nil)},
		{"onlyIf etagMatches fails: the object without body", apiRef, "get", []any{"conf/a", map[string]any{"onlyIf": map[string]string{"etagMatches": "0123"}}}, noBody(etag)},
		{"onlyIf etagDoesNotMatch fails", apiRef, "get", []any{"conf/a", map[string]any{"onlyIf": map[string]string{"etagDoesNotMatch": etag}}}, noBody(etag)},
		{"onlyIf uploadedBefore fails", apiRef, "get", []any{"conf/a", map[string]any{"onlyIf": map[string]any{"uploadedBefore": map[string]int64{"$date": up - 86400000}}}}, noBody(etag)},
		{"onlyIf uploadedAfter holds", apiRef, "get", []any{"conf/a", map[string]any{"onlyIf": map[string]any{"uploadedAfter": map[string]int64{"$date": up - 86400000}}}}, body("hello world", nil)},
		{"onlyIf from If-None-Match headers", apiRef, "get", []any{"conf/a", map[string]any{"onlyIf": map[string]any{"$headers": map[string]string{"if-none-match": `"` + etag + `"`}}}}, noBody(etag)},
		{"onlyIf quoted etag is refused", apiRef, "get", []any{"conf/a", map[string]any{"onlyIf": map[string]string{"etagMatches": `"` + etag + `"`}}}, throws("Conditional ETag should not be wrapped in quotes")},
		{"put onlyIf fails: null, nothing written", apiRef, "put", []any{"conf/a", "other", map[string]any{"onlyIf": map[string]string{"etagMatches": "0123"}}}, isNull},
		{"put onlyIf etagDoesNotMatch on the current etag: null", apiRef, "put", []any{"conf/a", "other", map[string]any{"onlyIf": map[string]string{"etagDoesNotMatch": etag}}}, isNull},
		{"put with the right md5", apiRef, "put", []any{"conf/md5", "hello world", map[string]any{"md5": etag}}, etagIs(etag)},
		{"put with a wrong md5 is BadDigest", errCodes, "put", []any{"conf/md5bad", "hello world", map[string]any{"md5": strings.Repeat("0", 32)}}, throws("put: The MD5 checksum you specified did not match what we received.")},
		{"put with sha256 keeps the checksum", apiRef, "put", []any{"conf/sha", "hello world", map[string]any{"sha256": hexSum(sha[:])}}, checksum("sha256", hexSum(sha[:]))},
		{"put with a wrong sha256 is BadDigest", errCodes, "put", []any{"conf/shabad", "hello world", map[string]any{"sha256": strings.Repeat("0", 64)}}, throws("(10037)")},
		{"two hash algorithms are refused", apiRef, "put", []any{"conf/x", "x", map[string]any{"md5": etag, "sha256": hexSum(sha[:])}}, throws("You cannot specify multiple hashing algorithms.")},
		{"custom metadata over 8,192 bytes", limitsRef, "put", []any{"conf/meta", "x", map[string]any{"customMetadata": map[string]string{"k": strings.Repeat("v", 8192)}}}, throws("put: Your metadata headers exceed the maximum allowed metadata size. (10012)")},
		{"a key over 1,024 bytes", limitsRef, "put", []any{strings.Repeat("k", 1025), "x"}, throws("The specified object name is not valid. (10020)")},
		// R2 takes the empty key (miniflare's "operations permit empty key"); S3 has
		// none, so it is never stored here: put says why, naming the documented
		// difference, and head, get and delete see no object (docs/r2.md).
		{"put of the empty key says why it is refused", "docs/r2.md", "put", []any{"", "empty"}, throws("put: the empty key cannot be stored: S3-compatible stores have no empty object key (docs/r2.md, Semantics and limits) (10020)")},
		{"head of the empty key is null", "docs/r2.md", "head", []any{""}, isNull},
		{"get of the empty key is null", "docs/r2.md", "get", []any{""}, isNull},
		{"delete of the empty key succeeds", "docs/r2.md", "delete", []any{""}, isNull},
		{"list limit over 1,000", errCodes, "list", []any{map[string]int{"limit": 1001}}, throws("list: MaxKeys params must be positive integer <= 1000. (10022)")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Logf("documented at %s", tc.doc)
			tc.check(t, h.call(tc.method, tc.args...))
		})
	}
	if o := decode[object](t, h.call("get", "conf/a")); o.Body == nil || *o.Body != "hello world" {
		t.Fatalf("a put whose onlyIf failed changed the object: %+v", o)
	}
	if r := h.call("head", "conf/md5bad"); string(r.Result) != "null" {
		t.Fatalf("a put with a bad digest stored the object: %s", r.Result)
	}
}

func isNull(t *testing.T, r reply) {
	t.Helper()
	if !r.OK || string(r.Result) != "null" {
		t.Fatalf("got %+v %s, want null", r, r.Result)
	}
}

func body(want string, rng map[string]int64) func(*testing.T, reply) {
	return func(t *testing.T, r reply) {
		o := decode[object](t, r)
		if o.Body == nil || *o.Body != want {
			t.Fatalf("body %v, want %q", o.Body, want)
		}
		for k, v := range rng {
			if o.Range[k] != v {
				t.Fatalf("range %v, want %v", o.Range, rng)
			}
		}
	}
}

func noBody(etag string) func(*testing.T, reply) {
	return func(t *testing.T, r reply) {
		o := decode[object](t, r)
		if o.Body != nil || o.Etag != etag {
			t.Fatalf("got %+v, want the object's metadata (etag %s) without body", o, etag)
		}
	}
}

func etagIs(etag string) func(*testing.T, reply) {
	return func(t *testing.T, r reply) {
		if o := decode[object](t, r); o.Etag != etag {
			t.Fatalf("etag %q, want %q", o.Etag, etag)
		}
	}
}

func checksum(alg, want string) func(*testing.T, reply) {
	return func(t *testing.T, r reply) {
		if o := decode[object](t, r); o.Checksums[alg] != want {
			t.Fatalf("checksums %v, want %s %s", o.Checksums, alg, want)
		}
	}
}

func throws(want string) func(*testing.T, reply) {
	return func(t *testing.T, r reply) {
		if r.OK || !strings.Contains(r.Error, want) {
			t.Fatalf("got %+v %s, want an error containing %q", r, r.Result, want)
		}
	}
}

// TestDeleteAndList: delete one key, a batch and a missing key; list by prefix and
// delimiter, with include, limit and cursor, startAfter (apiRef).
func TestDeleteAndList(t *testing.T) {
	h := newHarness(t)
	for _, k := range []string{"dir/a", "dir/b", "dir/sub/c", "other", "gone/1", "gone/2", "gone/3"} {
		decode[object](t, h.call("put", k, k, map[string]any{"httpMetadata": map[string]string{"contentType": "text/x-" + strings.ReplaceAll(k, "/", "-")}, "customMetadata": map[string]string{"k": k}}))
	}
	isNull(t, h.call("delete", "gone/1"))
	isNull(t, h.call("delete", []string{"gone/2", "gone/3", "never-there"}))
	l := decode[listing](t, h.call("list", map[string]any{"prefix": "gone/"}))
	if len(l.Objects) != 0 {
		t.Fatalf("after deleting gone/*: %+v", l)
	}
	l = decode[listing](t, h.call("list", map[string]any{"prefix": "dir/", "delimiter": "/"}))
	if keys(l) != "dir/a,dir/b" || !slices.Equal(l.DelimitedPrefixes, []string{"dir/sub/"}) || l.Truncated {
		t.Fatalf("prefix dir/ delimiter /: %s %v", keys(l), l.DelimitedPrefixes)
	}
	// Without include, R2 lists each object with empty httpMetadata and customMetadata
	// (apiRef R2ListOptions.include; miniflare's "list: includes httpMetadata and
	// customMetadata if specified").
	for _, tc := range []struct {
		include          []string
		wantHTTP, wantMD bool
	}{{nil, false, false}, {[]string{"httpMetadata"}, true, false}, {[]string{"customMetadata"}, false, true}, {[]string{"httpMetadata", "customMetadata"}, true, true}} {
		opts := map[string]any{"prefix": "dir/"}
		if tc.include != nil {
			opts["include"] = tc.include
		}
		o := decode[listing](t, h.call("list", opts)).Objects[0]
		if o.HTTPMetadata == nil || o.CustomMetadata == nil {
			t.Fatalf("list include %v: httpMetadata %v customMetadata %v, want objects (empty when not included)", tc.include, o.HTTPMetadata, o.CustomMetadata)
		}
		if gotHTTP, gotMD := o.HTTPMetadata["contentType"] == "text/x-dir-a", o.CustomMetadata["k"] == "dir/a"; gotHTTP != tc.wantHTTP || gotMD != tc.wantMD ||
			len(o.HTTPMetadata) != b2i(tc.wantHTTP) || len(o.CustomMetadata) != b2i(tc.wantMD) {
			t.Fatalf("list include %v: %+v", tc.include, o)
		}
	}
	first := decode[listing](t, h.call("list", map[string]any{"limit": 2}))
	if keys(first) != "dir/a,dir/b" || !first.Truncated || first.Cursor == "" {
		t.Fatalf("limit 2: %s truncated %v cursor %q", keys(first), first.Truncated, first.Cursor)
	}
	next := decode[listing](t, h.call("list", map[string]any{"limit": 2, "cursor": first.Cursor}))
	if keys(next) != "dir/sub/c,other" {
		t.Fatalf("second page: %s", keys(next))
	}
	after := decode[listing](t, h.call("list", map[string]any{"startAfter": "dir/b"}))
	if keys(after) != "dir/sub/c,other" {
		t.Fatalf("startAfter dir/b: %s", keys(after))
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func keys(l listing) string {
	var ks []string
	for _, o := range l.Objects {
		ks = append(ks, o.Key)
	}
	return strings.Join(ks, ",")
}
