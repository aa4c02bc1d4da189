package r2

import (
	"strconv"
	"strings"
)

// holds reports whether onlyIf holds for the object m (nil: there is none), as R2
// evaluates it: RFC 7232 section 6's precedence, where a failed If-Match is not rescued
// by a date and an If-None-Match that is present decides over If-Modified-Since
// (https://developers.cloudflare.com/r2/api/workers/workers-api-reference/#conditional-operations).
func (c *condition) holds(m *objectMeta) bool {
	if c == nil {
		return true
	}
	if m == nil {
		return c.EtagMatches == nil && c.UploadedAfter == nil
	}
	trunc := func(ms int64) int64 { return ms }
	if c.SecondsGranularity {
		trunc = func(ms int64) int64 { return ms / 1000 * 1000 }
	}
	uploaded := trunc(m.Uploaded)
	ifMatch := c.EtagMatches == nil || etagIn(c.EtagMatches, m.Etag, false)
	ifNoneMatch := c.EtagDoesNotMatch == nil || !etagIn(c.EtagDoesNotMatch, m.Etag, true)
	ifModifiedSince := c.UploadedAfter == nil || trunc(int64(*c.UploadedAfter)) < uploaded ||
		(c.EtagDoesNotMatch != nil && ifNoneMatch)
	ifUnmodifiedSince := c.UploadedBefore == nil || uploaded < trunc(int64(*c.UploadedBefore)) ||
		(c.EtagMatches != nil && ifMatch)
	return ifMatch && ifNoneMatch && ifModifiedSince && ifUnmodifiedSince
}

// etagIn: a wildcard matches any etag; a weak condition matches only in the weak
// comparison (If-None-Match), a strong one in both.
func etagIn(conds []etagCond, etag string, weak bool) bool {
	for _, c := range conds {
		if c.Type == "wildcard" {
			return true
		}
		if c.Value == etag && (c.Type != "weak" || weak) {
			return true
		}
	}
	return false
}

// byteRange is the inclusive range [start, end] of the object to return.
type byteRange struct{ start, end int64 }

// rangeOf is the range a get asks for on an object of size bytes; nil is the whole
// object. A range option that cannot be satisfied is InvalidRange; a Range header
// that does not parse or names several ranges returns the whole object.
func (r *request) rangeOf(size int64) (*byteRange, error) {
	if r.RangeHeader != nil {
		return headerRange(*r.RangeHeader, size)
	}
	if r.Range == nil {
		return nil, nil
	}
	var offset, length int64 = 0, -1
	if r.Range.Suffix != nil {
		suffix := int64(*r.Range.Suffix)
		if suffix <= 0 {
			return nil, errInvalidRange()
		}
		suffix = min(suffix, size)
		offset, length = size-suffix, suffix
	}
	if r.Range.Offset != nil {
		offset = int64(*r.Range.Offset)
	}
	if r.Range.Length != nil {
		length = int64(*r.Range.Length)
	}
	if length < 0 {
		length = size - offset
	}
	if offset < 0 || offset > size || length <= 0 {
		return nil, errInvalidRange()
	}
	length = min(length, size-offset)
	return &byteRange{offset, offset + length - 1}, nil
}

// headerRange parses an HTTP Range header of one byte range (RFC 9110 section 14.1.2).
func headerRange(h string, size int64) (*byteRange, error) {
	spec, ok := strings.CutPrefix(strings.TrimSpace(h), "bytes=")
	if !ok || strings.Contains(spec, ",") {
		return nil, nil
	}
	first, last, ok := strings.Cut(strings.TrimSpace(spec), "-")
	if !ok {
		return nil, nil
	}
	if first == "" {
		n, err := strconv.ParseInt(last, 10, 64)
		if err != nil || n <= 0 {
			return nil, nil
		}
		n = min(n, size)
		return &byteRange{size - n, size - 1}, nil
	}
	start, err := strconv.ParseInt(first, 10, 64)
	if err != nil {
		return nil, nil
	}
	end := size - 1
	if last != "" {
		if end, err = strconv.ParseInt(last, 10, 64); err != nil || end < start {
			return nil, nil
		}
		end = min(end, size-1)
	}
	if start >= size {
		return nil, errInvalidRange()
	}
	return &byteRange{start, end}, nil
}
