package r2

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
)

// What R2 keeps about an object that S3 has no field for travels as S3 user metadata
// (x-amz-meta-r2-*): the custom metadata with its keys' case and order, the HTTP
// metadata as R2 was given it (S3 would add a default Content-Type), the version and
// the checksums the writer asked to check.
const (
	metaCustom = "R2-Custom"
	metaHTTP   = "R2-Http"
	metaR2     = "R2"     // "1": written through R2
	metaSHA    = "R2-Sha" // + 1, 256, 384 or 512
)

// Limits of R2 (https://developers.cloudflare.com/r2/platform/limits/).
const (
	// MaxKeyBytes is the object key length limit.
	MaxKeyBytes = 1024
	// MaxMetadataBytes is the object metadata size limit, counted over the custom
	// metadata's keys and values.
	MaxMetadataBytes = 8192
	// MaxUploadBytes is the largest single-part upload (and part): 5 GiB less 5 MiB.
	MaxUploadBytes = 5<<30 - 5<<20
	// MaxParts is the most parts of a multipart upload.
	MaxParts = 10000
	// MaxListKeys is the most keys list returns per call (and its default).
	MaxListKeys = 1000
	// MaxDeleteKeys is the most keys one delete call takes
	// (https://developers.cloudflare.com/r2/api/workers/workers-api-reference/#bucket-method-definitions).
	MaxDeleteKeys = 1000
)

// userMetadata is the S3 user metadata that stores what R2 keeps beyond S3's fields.
func userMetadata(custom []record, http *httpFields, sums map[string]string) map[string]string {
	m := map[string]string{metaR2: "1"}
	if len(custom) > 0 {
		b, _ := json.Marshal(custom)
		m[metaCustom] = base64.RawURLEncoding.EncodeToString(b)
	}
	if http != nil {
		b, _ := json.Marshal(http)
		m[metaHTTP] = base64.RawURLEncoding.EncodeToString(b)
	}
	for k, v := range sums {
		m[metaSHA+k] = v
	}
	return m
}

// putOptions are the S3 options that store custom and http: the standard headers for
// other S3 readers, the user metadata for R2.
func putOptions(custom []record, http *httpFields, sums map[string]string) minio.PutObjectOptions {
	o := minio.PutObjectOptions{UserMetadata: userMetadata(custom, http, sums), DisableMultipart: true}
	if http != nil {
		o.ContentType, o.ContentLanguage = http.ContentType, http.ContentLanguage
		o.ContentDisposition, o.ContentEncoding = http.ContentDisposition, http.ContentEncoding
		o.CacheControl = http.CacheControl
		if http.CacheExpiry != nil {
			o.Expires = time.UnixMilli(int64(*http.CacheExpiry)).UTC()
		}
	}
	return o
}

// listedMeta is the R2 view of an object as a listing shows it. S3 keeps no version
// id without bucket versioning, so the version is derived from what identifies this
// write, the etag and the upload time, which head and list both see; the time is
// whole seconds, as S3's Last-Modified header has it.
func listedMeta(info minio.ObjectInfo) objectMeta {
	etag := strings.Trim(info.ETag, `"`)
	uploaded := info.LastModified.Truncate(time.Second).UnixMilli()
	v := sha256.Sum256([]byte(etag + "/" + strconv.FormatInt(uploaded, 10)))
	m := objectMeta{
		Name: info.Key, Version: hex.EncodeToString(v[:16]), Size: info.Size, Etag: etag,
		Uploaded: uploaded, StorageClass: "Standard", Checksums: map[string]string{},
		// What a list does not include is empty, as R2 lists it ({} in the Worker).
		HTTPFields: &httpFields{}, CustomFields: []record{},
	}
	if len(etag) == 32 && isHex(etag) {
		m.Checksums["0"] = etag
	}
	return m
}

// metaOf is the R2 view of an S3 object with its metadata (a stat).
func metaOf(key string, info minio.ObjectInfo) objectMeta {
	h := info.Metadata
	info.Key = key
	m := listedMeta(info)
	for i, alg := range []string{"1", "256", "384", "512"} {
		if v := h.Get("X-Amz-Meta-" + metaSHA + alg); v != "" {
			m.Checksums[string(rune('1'+i))] = v
		}
	}
	m.HTTPFields = httpOf(info)
	if b, err := base64.RawURLEncoding.DecodeString(h.Get("X-Amz-Meta-" + metaCustom)); err == nil && len(b) > 0 {
		_ = json.Unmarshal(b, &m.CustomFields)
	}
	return m
}

// httpOf is the HTTP metadata R2 was given, or for an object another S3 client wrote,
// its standard headers.
func httpOf(info minio.ObjectInfo) *httpFields {
	h := info.Metadata
	if b, err := base64.RawURLEncoding.DecodeString(h.Get("X-Amz-Meta-" + metaHTTP)); err == nil && len(b) > 0 {
		f := &httpFields{}
		if json.Unmarshal(b, f) == nil {
			return f
		}
	}
	if h.Get("X-Amz-Meta-"+metaR2) != "" {
		return &httpFields{} // written through R2 without HTTP metadata
	}
	f := &httpFields{
		ContentType: info.ContentType, ContentLanguage: h.Get("Content-Language"),
		ContentDisposition: h.Get("Content-Disposition"), ContentEncoding: h.Get("Content-Encoding"),
		CacheControl: h.Get("Cache-Control"),
	}
	if !info.Expires.IsZero() {
		ms := u64(info.Expires.UnixMilli())
		f.CacheExpiry = &ms
	}
	return f
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil
}

// customSize is the custom metadata's size as the limit counts it.
func customSize(custom []record) int {
	n := 0
	for _, r := range custom {
		n += len(r.K) + len(r.V)
	}
	return n
}
