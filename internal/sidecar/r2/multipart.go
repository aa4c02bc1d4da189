package r2

import (
	"cmp"
	"slices"
	"strings"

	"github.com/minio/minio-go/v7"
)

// Multipart uploads map one to one onto S3's
// (https://developers.cloudflare.com/r2/api/workers/workers-multipart-usage/).

func (c *call) createMultipart() error {
	if err := checkPut(c.req); err != nil {
		return err
	}
	opts := putOptions(c.req.CustomFields, c.req.HTTPFields, nil)
	opts.DisableMultipart = false
	id, err := c.b.core.NewMultipartUpload(c.ctx, c.b.cfg.Bucket, c.req.Object, opts)
	if err != nil {
		return err
	}
	writeMeta(c.w, map[string]string{"uploadId": id})
	return nil
}

func (c *call) uploadPart() error {
	if err := checkKey(c.req.Object); err != nil {
		return err
	}
	if c.req.PartNumber < 1 || c.req.PartNumber > MaxParts {
		return errInvalidArgument("part number must be between 1 and 10000 (inclusive)")
	}
	size := c.r.ContentLength - metadataLen(c.r)
	if c.r.ContentLength < 0 || size < 0 {
		return errInvalidArgument("the part's length is unknown")
	}
	if size > MaxUploadBytes {
		return errEntityTooLarge()
	}
	part, err := c.b.core.PutObjectPart(c.ctx, c.b.cfg.Bucket, c.req.Object, c.req.UploadID, c.req.PartNumber, c.r.Body, size, minio.PutObjectPartOptions{})
	if err != nil {
		return err
	}
	writeMeta(c.w, map[string]string{"etag": strings.Trim(part.ETag, `"`)})
	return nil
}

func (c *call) completeMultipart() error {
	if err := checkKey(c.req.Object); err != nil {
		return err
	}
	parts := make([]minio.CompletePart, len(c.req.Parts))
	for i, p := range c.req.Parts {
		parts[i] = minio.CompletePart{PartNumber: p.Part, ETag: p.Etag}
	}
	// A completed upload is gone in R2: a second complete() is NoSuchUpload, where S3
	// servers may answer a repeated complete with the object again.
	if _, err := c.b.core.ListObjectParts(c.ctx, c.b.cfg.Bucket, c.req.Object, c.req.UploadID, 0, 1); err != nil {
		return err
	}
	// R2 takes the parts in any order; S3 wants them ascending (InvalidPartOrder).
	slices.SortStableFunc(parts, func(a, b minio.CompletePart) int { return cmp.Compare(a.PartNumber, b.PartNumber) })
	if _, err := c.b.core.CompleteMultipartUpload(c.ctx, c.b.cfg.Bucket, c.req.Object, c.req.UploadID, parts, minio.PutObjectOptions{}); err != nil {
		return err
	}
	m, err := c.stat(c.req.Object)
	if err != nil {
		return err
	}
	if m == nil {
		return errBadUpload()
	}
	writeMeta(c.w, m)
	return nil
}

func (c *call) abortMultipart() error {
	if err := checkKey(c.req.Object); err != nil {
		return err
	}
	// abort() is idempotent in R2: an upload already aborted or completed is gone, and
	// that is success (workers-api-reference, R2MultipartUpload abort()).
	err := c.b.core.AbortMultipartUpload(c.ctx, c.b.cfg.Bucket, c.req.Object, c.req.UploadID)
	if err != nil && minio.ToErrorResponse(err).Code != "NoSuchUpload" {
		return err
	}
	writeMeta(c.w, struct{}{})
	return nil
}
