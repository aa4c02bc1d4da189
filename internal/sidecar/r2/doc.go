// Package r2 is the sidecar's R2 gateway: it answers workerd's `r2Bucket` binding
// protocol (one HTTP request per call to https://fake-host/, the call as JSON in the
// CF-R2-Request header or the body's first CF-R2-Metadata-Size bytes, errors in the
// CF-R2-Error header; see workerd src/workerd/api/r2-rpc.c++ and r2-api.capnp) and
// carries each call out on an S3-compatible store. The R2Bucket the call is for comes in
// the header podcontract.R2BucketHeader, which the rendered external service injects.
// R2's error texts, codes and limits follow
// https://developers.cloudflare.com/r2/api/error-codes/ and
// https://developers.cloudflare.com/r2/platform/limits/ (docs/r2.md).
package r2
