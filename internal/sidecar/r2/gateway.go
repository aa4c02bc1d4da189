package r2

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/workerd-operator/workerd-operator/internal/outbound"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// Headers of workerd's R2 binding protocol (workerd src/workerd/io/io-thread-context.c++).
const (
	headerRequest      = "CF-R2-Request"
	headerMetadataSize = "CF-R2-Metadata-Size"
	headerError        = "CF-R2-Error"
)

// BucketConfig is one R2Bucket as the gateway reaches it: a bucket of an S3-compatible
// store. The credentials come from the named environment variables (a Secret's keys
// in a pod) unless set directly.
type BucketConfig struct {
	// Name is the R2Bucket's name: the value of podcontract.R2BucketHeader.
	Name string `json:"name"`
	// Endpoint is the store's URL, e.g. "https://s3.example.com" or "http://127.0.0.1:7070".
	Endpoint string `json:"endpoint"`
	// Bucket is the S3 bucket.
	Bucket string `json:"bucket"`
	// Region is the S3 region ("us-east-1" when empty).
	Region string `json:"region,omitempty"`
	// AccessKeyIDEnv and SecretAccessKeyEnv name the env vars holding the credentials.
	AccessKeyIDEnv     string `json:"accessKeyIdEnv,omitempty"`
	SecretAccessKeyEnv string `json:"secretAccessKeyEnv,omitempty"`
	// AccessKeyID and SecretAccessKey are the credentials themselves (tests).
	AccessKeyID     string `json:"-"`
	SecretAccessKey string `json:"-"`
}

// ParseConfig reads the JSON list of BucketConfig that the rendered sidecar env
// (podcontract.R2ConfigEnv) carries.
func ParseConfig(s string) ([]BucketConfig, error) {
	var out []BucketConfig
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, fmt.Errorf("r2: $%s: %w", podcontract.R2ConfigEnv, err)
	}
	return out, nil
}

// Gateway answers workerd's R2 binding calls for its buckets.
type Gateway struct {
	buckets map[string]*bucket
	logf    func(format string, args ...any)
}

// bucket is one configured bucket and its S3 client.
type bucket struct {
	cfg  BucketConfig
	core *minio.Core
}

// Options configure a Gateway.
type Options struct {
	// Logf receives the S3 errors behind internal errors; nil discards them.
	Logf func(format string, args ...any)
	// Outbound, when set, are the Worker's outbound rules (podcontract.SidecarOutboundEnv):
	// the gateway connects to a store only at an address they allow, checked when it
	// dials (outbound.Rules.Control), as workerd's network service connects for the
	// Worker's own fetch(). nil: any address (local runs and tests).
	Outbound *outbound.Rules
}

// New makes a Gateway for cfgs.
func New(cfgs []BucketConfig, o Options) (*Gateway, error) {
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	g := &Gateway{buckets: map[string]*bucket{}, logf: logf}
	for _, c := range cfgs {
		core, err := newClient(c, o.Outbound)
		if err != nil {
			return nil, fmt.Errorf("r2: bucket %q: %w", c.Name, err)
		}
		g.buckets[c.Name] = &bucket{cfg: c, core: core}
	}
	return g, nil
}

func newClient(c BucketConfig, rules *outbound.Rules) (*minio.Core, error) {
	u, err := url.Parse(c.Endpoint)
	if err != nil || (u.Scheme+"://" != "http://" && u.Scheme+"://" != "https://") || u.Host == "" {
		return nil, fmt.Errorf("endpoint %q: want an http:// or https:// URL", c.Endpoint)
	}
	id, secret := c.AccessKeyID, c.SecretAccessKey
	if id == "" && c.AccessKeyIDEnv != "" {
		id = os.Getenv(c.AccessKeyIDEnv)
	}
	if secret == "" && c.SecretAccessKeyEnv != "" {
		secret = os.Getenv(c.SecretAccessKeyEnv)
	}
	region := c.Region
	if region == "" {
		region = "us-east-1"
	}
	secure := u.Scheme+"://" == "https://"
	opts := &minio.Options{Creds: credentials.NewStaticV4(id, secret, ""), Secure: secure, Region: region}
	if rules != nil {
		tr, err := minio.DefaultTransport(secure)
		if err != nil {
			return nil, err
		}
		// No proxy: the guard checks the address dialed, which must be the store's.
		tr.Proxy = nil
		tr.DialContext = rules.Dialer(net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
		opts.Transport = tr
	}
	return minio.NewCore(u.Host, opts)
}

// ServeHTTP answers one binding call: GET carries the call in CF-R2-Request, PUT in
// the body's first CF-R2-Metadata-Size bytes, followed by the value.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := r.Header.Get(podcontract.R2BucketHeader)
	b, ok := g.buckets[name]
	if !ok {
		g.logf("r2: no bucket %q configured (header %s)", name, podcontract.R2BucketHeader)
		writeError(w, errInternal(), nil)
		return
	}
	req, err := readRequest(r)
	if err != nil {
		writeError(w, errInvalidArgument(err.Error()), nil)
		return
	}
	c := &call{g: g, b: b, req: req, w: w, r: r, ctx: r.Context()}
	if err := c.dispatch(); err != nil {
		c.fail(err)
	}
}

func readRequest(r *http.Request) (*request, error) {
	var raw []byte
	switch r.Method {
	case http.MethodGet:
		raw = []byte(r.Header.Get(headerRequest))
	case http.MethodPut:
		n, err := strconv.Atoi(r.Header.Get(headerMetadataSize))
		if err != nil || n < 0 || n > 1<<20 {
			return nil, fmt.Errorf("%s: %q", headerMetadataSize, r.Header.Get(headerMetadataSize))
		}
		raw = make([]byte, n)
		if _, err := io.ReadFull(r.Body, raw); err != nil {
			return nil, fmt.Errorf("reading the request metadata: %w", err)
		}
	default:
		return nil, fmt.Errorf("method %s", r.Method)
	}
	req := &request{}
	if err := json.Unmarshal(raw, req); err != nil {
		return nil, fmt.Errorf("request metadata: %w", err)
	}
	return req, nil
}

// call is one binding call being answered.
type call struct {
	g   *Gateway
	b   *bucket
	req *request
	w   http.ResponseWriter
	r   *http.Request
	ctx context.Context
}

func (c *call) dispatch() error {
	switch c.req.Method {
	case "head":
		return c.head()
	case "get":
		return c.get()
	case "put":
		return c.put()
	case "delete":
		return c.delete()
	case "list":
		return c.list()
	case "createMultipartUpload":
		return c.createMultipart()
	case "uploadPart":
		return c.uploadPart()
	case "completeMultipartUpload":
		return c.completeMultipart()
	case "abortMultipartUpload":
		return c.abortMultipart()
	}
	return errInvalidArgument(fmt.Sprintf("method %q is not supported", c.req.Method))
}

// fail answers with err as an R2 error, logging the S3 error behind an internal one.
func (c *call) fail(err error) {
	e := fromS3(err)
	if e.Code == CodeInternal {
		c.g.logf("r2: %s %s %q: %v", c.b.cfg.Name, c.req.Method, c.req.Object, err)
	}
	writeError(c.w, e, nil)
}

// writeMeta answers with v as the response's metadata (and no value).
func writeMeta(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set(headerMetadataSize, strconv.Itoa(len(b)))
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}

// writeError answers with e; meta, when set, is the object's metadata (a get whose
// onlyIf failed returns the object's head).
func writeError(w http.ResponseWriter, e *Error, meta *objectMeta) {
	w.Header().Set(headerError, e.header())
	if meta == nil {
		w.WriteHeader(e.Status)
		return
	}
	b, _ := json.Marshal(meta)
	w.Header().Set(headerMetadataSize, strconv.Itoa(len(b)))
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(e.Status)
	_, _ = w.Write(b)
}
