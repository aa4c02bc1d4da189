package r2

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"strconv"
)

// The JSON of workerd's R2 binding protocol: capnp's JSON encoding of R2BindingRequest
// and the responses in workerd's src/workerd/api/r2-api.capnp. 64-bit integers arrive as
// strings; fields left at their default are omitted.

// request is one R2BindingRequest: the method and the union of the methods' fields.
type request struct {
	Version int    `json:"version"`
	Method  string `json:"method"`
	Object  string `json:"object"`
	// get
	Range       *rangeSpec `json:"range,omitempty"`
	RangeHeader *string    `json:"rangeHeader,omitempty"`
	OnlyIf      *condition `json:"onlyIf,omitempty"`
	// put, createMultipartUpload
	CustomFields []record    `json:"customFields,omitempty"`
	HTTPFields   *httpFields `json:"httpFields,omitempty"`
	MD5          []byte      `json:"md5,omitempty"` // base64 in the JSON
	SHA1         hexBytes    `json:"sha1,omitempty"`
	SHA256       hexBytes    `json:"sha256,omitempty"`
	SHA384       hexBytes    `json:"sha384,omitempty"`
	SHA512       hexBytes    `json:"sha512,omitempty"`
	StorageClass string      `json:"storageClass,omitempty"`
	SSEC         *struct{}   `json:"ssec,omitempty"`
	// delete
	Objects []string `json:"objects,omitempty"`
	// list
	Limit      *u64   `json:"limit,omitempty"`
	Prefix     string `json:"prefix,omitempty"`
	Cursor     string `json:"cursor,omitempty"`
	Delimiter  string `json:"delimiter,omitempty"`
	StartAfter string `json:"startAfter,omitempty"`
	Include    []int  `json:"include,omitempty"`
	NewRuntime bool   `json:"newRuntime,omitempty"`
	// multipart
	UploadID   string          `json:"uploadId,omitempty"`
	PartNumber int             `json:"partNumber,omitempty"`
	Parts      []publishedPart `json:"parts,omitempty"`
}

type record struct {
	K string `json:"k"`
	V string `json:"v"`
}

type rangeSpec struct {
	Offset *u64 `json:"offset,omitempty"`
	Length *u64 `json:"length,omitempty"`
	Suffix *u64 `json:"suffix,omitempty"`
}

type etagCond struct {
	Value string `json:"value"`
	Type  string `json:"type"` // strong, weak or wildcard
}

type condition struct {
	EtagMatches        []etagCond `json:"etagMatches,omitempty"`
	EtagDoesNotMatch   []etagCond `json:"etagDoesNotMatch,omitempty"`
	UploadedBefore     *u64       `json:"uploadedBefore,omitempty"`
	UploadedAfter      *u64       `json:"uploadedAfter,omitempty"`
	SecondsGranularity bool       `json:"secondsGranularity,omitempty"`
}

type httpFields struct {
	ContentType        string `json:"contentType,omitempty"`
	ContentLanguage    string `json:"contentLanguage,omitempty"`
	ContentDisposition string `json:"contentDisposition,omitempty"`
	ContentEncoding    string `json:"contentEncoding,omitempty"`
	CacheControl       string `json:"cacheControl,omitempty"`
	CacheExpiry        *u64   `json:"cacheExpiry,omitempty"` // ms since the epoch
}

type publishedPart struct {
	Etag string `json:"etag"`
	Part int    `json:"part"`
}

// Include fields of a list request (R2ListRequest.IncludeField).
const (
	includeHTTP   = 0
	includeCustom = 1
)

// objectMeta is R2HeadResponse: what head, get, put and list return per object.
type objectMeta struct {
	Name         string            `json:"name"`
	Version      string            `json:"version"`
	Size         int64             `json:"size"`
	Etag         string            `json:"etag"`
	Uploaded     int64             `json:"uploaded"` // ms since the epoch
	HTTPFields   *httpFields       `json:"httpFields"`
	CustomFields []record          `json:"customFields"`
	Range        *outRange         `json:"range,omitempty"`
	Checksums    map[string]string `json:"checksums,omitempty"` // "0" md5 ... "4" sha512, hex
	StorageClass string            `json:"storageClass"`
}

type outRange struct {
	Offset int64 `json:"offset"`
	Length int64 `json:"length"`
}

type listResponse struct {
	Objects           []objectMeta `json:"objects"`
	Truncated         bool         `json:"truncated"`
	Cursor            string       `json:"cursor,omitempty"`
	DelimitedPrefixes []string     `json:"delimitedPrefixes"`
}

// u64 is a capnp UInt64 in JSON: a number or a decimal string.
type u64 uint64

func (v *u64) UnmarshalJSON(b []byte) error {
	b = bytes.Trim(b, `"`)
	n, err := strconv.ParseUint(string(b), 10, 64)
	*v = u64(n)
	return err
}

// hexBytes is capnp Data annotated $Json.hex.
type hexBytes []byte

func (h *hexBytes) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	out, err := hex.DecodeString(s)
	*h = out
	return err
}
