package r2

import (
	"slices"

	"golang.org/x/sync/errgroup"
)

// statConcurrency bounds the stats a list with include runs at once.
const statConcurrency = 8

// list answers one page: S3's continuation token is the cursor. include asks for the
// HTTP and custom metadata, which S3 lists lack: each listed object is then stat'ed.
func (c *call) list() error {
	limit := MaxListKeys
	if c.req.Limit != nil {
		if *c.req.Limit < 1 || *c.req.Limit > MaxListKeys {
			return errInvalidMaxKeys()
		}
		limit = int(*c.req.Limit)
	}
	res, err := c.b.core.ListObjectsV2(c.b.cfg.Bucket, c.req.Prefix, c.req.StartAfter, c.req.Cursor, c.req.Delimiter, limit)
	if err != nil {
		return err
	}
	out := listResponse{Objects: make([]objectMeta, len(res.Contents)), Truncated: res.IsTruncated, DelimitedPrefixes: []string{}}
	if res.IsTruncated {
		out.Cursor = res.NextContinuationToken
	}
	for _, p := range res.CommonPrefixes {
		out.DelimitedPrefixes = append(out.DelimitedPrefixes, p.Prefix)
	}
	for i, o := range res.Contents {
		out.Objects[i] = listedMeta(o)
	}
	withHTTP, withCustom := slices.Contains(c.req.Include, includeHTTP), slices.Contains(c.req.Include, includeCustom)
	if withHTTP || withCustom {
		if err := c.addMetadata(out.Objects, withHTTP, withCustom); err != nil {
			return err
		}
	}

	writeMeta(c.w, out)
	return nil
}

// addMetadata fills the HTTP and/or custom metadata of objs from a stat of each.
func (c *call) addMetadata(objs []objectMeta, withHTTP, withCustom bool) error {
	var g errgroup.Group
	g.SetLimit(statConcurrency)
	for i := range objs {
		g.Go(func() error {
			m, err := c.stat(objs[i].Name)
			if err != nil || m == nil {
				return err // one deleted meanwhile keeps its listed fields
			}
			if withHTTP {
				objs[i].HTTPFields = m.HTTPFields
			}
			if withCustom {
				objs[i].CustomFields = m.CustomFields
			}
			objs[i].Checksums = m.Checksums
			return nil
		})
	}
	return g.Wait()
}
