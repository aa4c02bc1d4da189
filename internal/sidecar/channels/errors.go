package channels

import (
	"errors"
	"fmt"
	"net/http"
)

// Code is a stable, machine-readable error code. The same codes are carried in HTTP error
// bodies ({"error":{"code":...}}) and in the JavaScript client's Error.code.
type Code string

// The stable error codes of the channel API (docs/channels.md lists them with examples).
const (
	// CodeInvalidArgument: a malformed request (missing field, wrong type, bad timeoutMs).
	CodeInvalidArgument Code = "INVALID_ARGUMENT"
	// CodeInvalidChannelName: a channel name outside 1..MaxChannelNameBytes bytes of UTF-8.
	CodeInvalidChannelName Code = "INVALID_CHANNEL_NAME"
	// CodeInvalidMessage: a message that is not valid UTF-8 text.
	CodeInvalidMessage Code = "INVALID_MESSAGE"
	// CodeMessageTooLarge: a message over Limits.MaxMessageBytes (64 KiB, docs/channels.md).
	CodeMessageTooLarge Code = "MESSAGE_TOO_LARGE"
	// CodeChannelLimit: subscribing would open channel MaxChannels+1 (64, docs/channels.md).
	CodeChannelLimit Code = "CHANNEL_LIMIT"
	// CodeSubscriberLimit: subscribing would add subscriber MaxSubscribers+1 (256, docs/channels.md).
	CodeSubscriberLimit Code = "SUBSCRIBER_LIMIT"
	// CodeUnknownHandle: a handle this registry never issued (or malformed).
	CodeUnknownHandle Code = "UNKNOWN_HANDLE"
	// CodeForeignHandle: a handle issued to another Durable Object instance.
	CodeForeignHandle Code = "FOREIGN_HANDLE"
	// CodeSubscriptionGone: a handle that was issued but was unsubscribed or collected
	// after its lease lapsed.
	CodeSubscriptionGone Code = "SUBSCRIPTION_GONE"
	// CodeRegistryRestarted: the handle belongs to an earlier run of the sidecar (or the
	// sidecar is shutting down); the registry and its subscriptions are gone.
	CodeRegistryRestarted Code = "REGISTRY_RESTARTED"
)

// Error is an API error with a stable Code, an HTTP status, and (for limits) the limit's
// value and source.
type Error struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
	// Limit is the value of the limit that was hit (bytes or count), 0 when not a limit.
	Limit int64 `json:"limit,omitempty"`
	// Source names where the limit's value comes from (a document, a documentation URL or a spec field).
	Source string `json:"source,omitempty"`
	Status int    `json:"-"`
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

func newError(status int, code Code, format string, args ...any) *Error {
	return &Error{Code: code, Status: status, Message: fmt.Sprintf(format, args...)}
}

func limitError(code Code, limit int64, source, format string, args ...any) *Error {
	e := newError(http.StatusTooManyRequests, code, format, args...)
	if code == CodeMessageTooLarge {
		e.Status = http.StatusRequestEntityTooLarge
	}
	e.Limit = limit
	e.Source = source
	return e
}

// CodeOf returns the Code of err when it is (or wraps) an *Error, else "".
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
