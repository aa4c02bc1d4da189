package r2

import (
	"bytes"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash"
	"io"
	"net/http"
	"strconv"

	"github.com/minio/minio-go/v7"
)

func checkKey(key string) error {
	if len(key) > MaxKeyBytes {
		return errInvalidObjectName()
	}
	return nil
}

// stat is the object's R2 metadata, nil when there is none.
func (c *call) stat(key string) (*objectMeta, error) {
	info, err := c.b.core.StatObject(c.ctx, c.b.cfg.Bucket, key, minio.StatObjectOptions{})
	if err != nil {
		if fromS3(err).Code == CodeNoSuchKey {
			return nil, nil
		}
		return nil, err
	}
	m := metaOf(key, info)
	return &m, nil
}

func (c *call) head() error {
	if err := checkKey(c.req.Object); err != nil {
		return err
	}
	if c.req.Object == "" {
		return errNoSuchKey() // never stored (checkPut)
	}
	m, err := c.stat(c.req.Object)
	if err != nil {
		return err
	}
	if m == nil {
		return errNoSuchKey()
	}
	m.Range = wholeRange(m.Size)
	writeMeta(c.w, m)
	return nil
}

// wholeRange is the range R2 reports for a head, or a get without a (single) range:
// the whole object (miniflare's R2 tests, "head: returns metadata for existing keys").
func wholeRange(size int64) *outRange { return &outRange{Offset: 0, Length: size} }

// get answers with the metadata followed by the value (or its range). A failed onlyIf
// answers 412 with the object's metadata, which workerd returns without a body. A get
// of the whole object without onlyIf takes one GetObject, whose headers carry the
// metadata; otherwise a stat first decides.
func (c *call) get() error {
	if err := checkKey(c.req.Object); err != nil {
		return err
	}
	if c.req.Object == "" {
		return errNoSuchKey() // never stored (checkPut)
	}
	if c.req.OnlyIf == nil && c.req.Range == nil && c.req.RangeHeader == nil {
		body, info, _, err := c.b.core.GetObject(c.ctx, c.b.cfg.Bucket, c.req.Object, minio.GetObjectOptions{})
		if err != nil {
			return err
		}
		m := metaOf(c.req.Object, info)
		m.Range = wholeRange(info.Size)
		return c.writeBody(&m, body, info.Size)
	}
	m, err := c.stat(c.req.Object)
	if err != nil {
		return err
	}
	if m == nil {
		return errNoSuchKey()
	}
	if !c.req.OnlyIf.holds(m) {
		writeError(c.w, errPreconditionFailed(), m)
		return nil
	}
	rng, err := c.req.rangeOf(m.Size)
	if err != nil {
		return err
	}
	opts := minio.GetObjectOptions{}
	_ = opts.SetMatchETag(m.Etag)
	length := m.Size
	m.Range = wholeRange(m.Size)
	if rng != nil {
		_ = opts.SetRange(rng.start, rng.end)
		length = rng.end - rng.start + 1
		m.Range = &outRange{Offset: rng.start, Length: length}
	}
	var body io.ReadCloser = io.NopCloser(bytes.NewReader(nil))
	if length > 0 {
		if body, _, _, err = c.b.core.GetObject(c.ctx, c.b.cfg.Bucket, c.req.Object, opts); err != nil {
			return err
		}
	}
	return c.writeBody(m, body, length)
}

// writeBody answers with m followed by length bytes of body, and closes body.
func (c *call) writeBody(m *objectMeta, body io.ReadCloser, length int64) error {
	defer body.Close()
	meta, _ := json.Marshal(m)
	c.w.Header().Set(headerMetadataSize, strconv.Itoa(len(meta)))
	c.w.Header().Set("Content-Length", strconv.FormatInt(int64(len(meta))+length, 10))
	_, _ = c.w.Write(meta)
	if _, err := io.CopyN(c.w, body, length); err != nil {
		c.g.logf("r2: %s get %q: value cut after the headers: %v", c.b.cfg.Name, c.req.Object, err)
		panic(http.ErrAbortHandler) // the length promised cannot be kept: drop the connection
	}
	return nil
}

// put stores the value that follows the metadata in the body. A failed onlyIf answers
// 412, which workerd returns as null.
func (c *call) put() error {
	if err := checkPut(c.req); err != nil {
		return err
	}
	size := c.r.ContentLength - metadataLen(c.r)
	if c.r.ContentLength < 0 || size < 0 {
		return errInvalidArgument("the value's length is unknown")
	}
	if size > MaxUploadBytes {
		return errEntityTooLarge()
	}
	if c.req.OnlyIf != nil {
		m, err := c.stat(c.req.Object)
		if err != nil {
			return err
		}
		if !c.req.OnlyIf.holds(m) {
			return errPreconditionFailed()
		}
	}
	v := newVerifier(c.r.Body, size, c.req)
	if size == 0 && !v.verify() {
		return v.err
	}
	_, err := c.b.core.Client.PutObject(c.ctx, c.b.cfg.Bucket, c.req.Object, v, size, putOptions(c.req.CustomFields, c.req.HTTPFields, v.sums()))
	if v.err != nil {
		return v.err
	}
	if err != nil {
		return err
	}
	m, err := c.stat(c.req.Object)
	if err != nil {
		return err
	}
	if m == nil {
		return errInternal()
	}
	writeMeta(c.w, m)
	return nil
}

func metadataLen(r *http.Request) int64 {
	n, _ := strconv.ParseInt(r.Header.Get(headerMetadataSize), 10, 64)
	return n
}

// checkPut checks a put's or createMultipartUpload's key and custom metadata.
func checkPut(r *request) error {
	if err := checkKey(r.Object); err != nil {
		return err
	}
	if r.Object == "" {
		return errEmptyKey()
	}
	if customSize(r.CustomFields) > MaxMetadataBytes {
		return errMetadataTooLarge()
	}
	return nil
}

// delete removes one key or up to MaxDeleteKeys; a key that does not exist is no error.
func (c *call) delete() error {
	keys := c.req.Objects
	if c.req.Objects == nil {
		keys = []string{c.req.Object}
	}
	if len(keys) > MaxDeleteKeys {
		return errInvalidArgument("delete takes at most 1000 keys")
	}
	for _, k := range keys {
		if err := checkKey(k); err != nil {
			return err
		}
	}
	objs := make(chan minio.ObjectInfo, len(keys))
	for _, k := range keys {
		objs <- minio.ObjectInfo{Key: k}
	}
	close(objs)
	for res := range c.b.core.Client.RemoveObjects(c.ctx, c.b.cfg.Bucket, objs, minio.RemoveObjectsOptions{}) {
		if res.Err != nil && fromS3(res.Err).Code != CodeNoSuchKey {
			return res.Err
		}
	}
	writeMeta(c.w, struct{}{})
	return nil
}

// verifier passes the value through and checks the hashes the put gave: on its last
// bytes it fails the upload with BadDigest instead of returning them.
type verifier struct {
	r      io.Reader
	left   int64
	checks []check
	err    error
}

type check struct {
	name, field string // the algorithm as R2 names it; its checksums key
	want        []byte
	h           hash.Hash
}

func newVerifier(r io.Reader, size int64, req *request) *verifier {
	v := &verifier{r: io.LimitReader(r, size), left: size}
	for _, c := range []check{
		{"MD5", "", req.MD5, md5.New()}, {"SHA-1", "1", req.SHA1, sha1.New()},
		{"SHA-256", "256", req.SHA256, sha256.New()}, {"SHA-384", "384", req.SHA384, sha512.New384()},
		{"SHA-512", "512", req.SHA512, sha512.New()},
	} {
		if len(c.want) > 0 {
			v.checks = append(v.checks, c)
		}
	}
	return v
}

// sums are the checked hashes to store, by metaSHA suffix (MD5 is the etag).
func (v *verifier) sums() map[string]string {
	out := map[string]string{}
	for _, c := range v.checks {
		if c.field != "" {
			out[c.field] = hex.EncodeToString(c.want)
		}
	}
	return out
}

var errShortBody = errors.New("r2: the value ended before its length")

func (v *verifier) Read(p []byte) (int, error) {
	n, err := v.r.Read(p)
	for _, c := range v.checks {
		c.h.Write(p[:n])
	}
	v.left -= int64(n)
	if v.left == 0 && n > 0 && !v.verify() {
		return 0, v.err
	}
	if err == io.EOF && v.left > 0 {
		return n, errShortBody
	}
	return n, err
}

// verify compares the hashes of everything read with the wanted ones; on a mismatch
// err is BadDigest.
func (v *verifier) verify() bool {
	for _, c := range v.checks {
		if got := c.h.Sum(nil); !bytes.Equal(got, c.want) {
			v.err = errBadDigest(c.name, c.want, got)
			return false
		}
	}
	return true
}
