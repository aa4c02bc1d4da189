package r2

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/minio/minio-go/v7"
)

// Error is an R2 error: the HTTP status workerd reads and the v4 code and message it
// throws as "<method>: <message> (<code>)"
// (https://developers.cloudflare.com/r2/api/error-codes/).
type Error struct {
	Status  int
	Code    int
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("%s (%d)", e.Message, e.Code) }

// header is the CF-R2-Error value workerd decodes (R2ErrorResponse in r2-api.capnp).
func (e *Error) header() string {
	b, _ := json.Marshal(struct {
		Version int    `json:"version"`
		V4Code  int    `json:"v4code"`
		Message string `json:"message"`
	}{1, e.Code, e.Message})
	return string(b)
}

// R2's v4 error codes (https://developers.cloudflare.com/r2/api/error-codes/).
const (
	CodeInternal          = 10001
	CodeNoSuchKey         = 10007
	CodeEntityTooSmall    = 10011
	CodeMetadataTooLarge  = 10012
	CodeInvalidObjectName = 10020
	CodeInvalidMaxKeys    = 10022
	CodeNoSuchUpload      = 10024
	CodeInvalidPart       = 10025
	CodeInvalidArgument   = 10029
	CodePreconditionFail  = 10031
	CodeBadDigest         = 10037
	CodeInvalidRange      = 10039
	CodeBadUpload         = 10048
	CodeEntityTooLarge    = 100100
)

func errInternal() *Error {
	return &Error{http.StatusInternalServerError, CodeInternal, "We encountered an internal error. Please try again."}
}
func errNoSuchKey() *Error {
	return &Error{http.StatusNotFound, CodeNoSuchKey, "The specified key does not exist."}
}
func errEntityTooLarge() *Error {
	return &Error{http.StatusBadRequest, CodeEntityTooLarge, "Your proposed upload exceeds the maximum allowed object size."}
}
func errEntityTooSmall() *Error {
	return &Error{http.StatusBadRequest, CodeEntityTooSmall, "Your proposed upload is smaller than the minimum allowed object size."}
}
func errMetadataTooLarge() *Error {
	return &Error{http.StatusBadRequest, CodeMetadataTooLarge, "Your metadata headers exceed the maximum allowed metadata size."}
}
func errInvalidObjectName() *Error {
	return &Error{http.StatusBadRequest, CodeInvalidObjectName, "The specified object name is not valid."}
}
func errEmptyKey() *Error {
	return &Error{http.StatusBadRequest, CodeInvalidObjectName, "the empty key cannot be stored: S3-compatible stores have no empty object key (docs/r2.md, Semantics and limits)"}
}
func errInvalidMaxKeys() *Error {
	return &Error{http.StatusBadRequest, CodeInvalidMaxKeys, "MaxKeys params must be positive integer <= 1000."}
}
func errNoSuchUpload() *Error {
	return &Error{http.StatusBadRequest, CodeNoSuchUpload, "The specified multipart upload does not exist."}
}
func errInvalidPart() *Error {
	return &Error{http.StatusBadRequest, CodeInvalidPart, "One or more of the specified parts could not be found."}
}
func errInvalidArgument(what string) *Error {
	return &Error{http.StatusBadRequest, CodeInvalidArgument, "Invalid argument: " + what}
}
func errPreconditionFailed() *Error {
	return &Error{http.StatusPreconditionFailed, CodePreconditionFail, "At least one of the pre-conditions you specified did not hold."}
}
func errInvalidRange() *Error {
	return &Error{http.StatusRequestedRangeNotSatisfiable, CodeInvalidRange, "The requested range is not satisfiable"}
}
func errBadUpload() *Error {
	return &Error{http.StatusInternalServerError, CodeBadUpload, "There was a problem with the multipart upload."}
}

// errBadDigest is R2's message for a put whose body does not hash to the given value.
func errBadDigest(algorithm string, provided, actual []byte) *Error {
	return &Error{http.StatusBadRequest, CodeBadDigest, fmt.Sprintf(
		"The %s checksum you specified did not match what we received.\nYou provided a %s checksum with value: %s\nActual %s was: %s",
		algorithm, algorithm, hex.EncodeToString(provided), algorithm, hex.EncodeToString(actual))}
}

// fromS3 maps an S3 error to the R2 error of the same meaning; anything else is an
// internal error (the caller logs the S3 error).
func fromS3(err error) *Error {
	if e, ok := err.(*Error); ok {
		return e
	}
	switch minio.ToErrorResponse(err).Code {
	case "NoSuchKey", "NotFound":
		return errNoSuchKey()
	case "PreconditionFailed":
		return errPreconditionFailed()
	case "NoSuchUpload":
		return errNoSuchUpload()
	case "InvalidPart", "InvalidPartOrder":
		return errInvalidPart()
	case "EntityTooSmall":
		return errEntityTooSmall()
	case "EntityTooLarge":
		return errEntityTooLarge()
	case "InvalidRange":
		return errInvalidRange()
	case "MetadataTooLarge":
		return errMetadataTooLarge()
	case "KeyTooLongError":
		return errInvalidObjectName()
	}
	return errInternal()
}
