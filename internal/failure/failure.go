package failure

import (
	"regexp"
	"strings"
)

// Class is how a failed Durable Object call relates to a retry (docs/failures.md,
// `classifyDoCall`). The values are snake_case strings, valid metav1.Condition reasons.
type Class string

// The call classes.
const (
	// ClassSupersededIsolate: a deploy replaced the isolate mid-call
	// ("Durable Object reset because its code was updated."). Retryable.
	ClassSupersededIsolate Class = "superseded_isolate"
	// ClassConnectionLost: the stub or storage connection dropped
	// ("Network connection lost."). Retryable on a fresh stub.
	ClassConnectionLost Class = "connection_lost"
	// ClassStorageReset: storage reset the object — cold start, live write or a
	// storage timeout. Retryable.
	ClassStorageReset Class = "storage_reset"
	// ClassRetryableFlag: the runtime set `.retryable = true` on some link of the chain
	// and no prose named a more specific class. Retryable.
	ClassRetryableFlag Class = "retryable_flag"
	// ClassOverloaded: the object (or the account) shed the call under load
	// ("Durable Object is overloaded. ..."). Never retried: Cloudflare's error-handling
	// guidance forbids it, retrying is what overloaded it.
	ClassOverloaded Class = "overloaded"
	// ClassPermanent: everything else — the call ran and the answer is the error.
	ClassPermanent Class = "permanent"
)

// Classes lists every Class, in the order of docs/failures.md's table.
var Classes = []Class{ClassSupersededIsolate, ClassConnectionLost, ClassStorageReset, ClassRetryableFlag, ClassOverloaded, ClassPermanent}

// IsRetryable reports whether a retry (with backoff, on a fresh stub) may act on a call
// that failed with class c: true for superseded_isolate, connection_lost,
// storage_reset and retryable_flag; false for overloaded, permanent and anything else.
func IsRetryable(c Class) bool {
	switch c {
	case ClassSupersededIsolate, ClassConnectionLost, ClassStorageReset, ClassRetryableFlag:
		return true
	}
	return false
}

// Cause names the limit or condition a failure message points at (docs/failures.md;
// the `classifyError` causes, plus StartupError and ConfigError for workerd's config
// loader). The values are snake_case strings, valid metav1.Condition reasons.
type Cause string

// The causes.
const (
	// CauseSQLiteNoMem: SQLite ran out of memory (SQLITE_NOMEM, "out of memory"); ask
	// for a smaller transaction.
	CauseSQLiteNoMem Cause = "sqlite_nomem"
	// CauseSQLiteFull: the storage wall ("database or disk is full: SQLITE_FULL");
	// reads and deletes still work, drain data or grow the volume.
	CauseSQLiteFull Cause = "sqlite_full"
	// CauseOOM: memory — V8 heap limit reached (workerd aborts), the container's cgroup
	// OOM killer (reason OOMKilled, SIGKILL/137), or a platform memory-limit message.
	CauseOOM Cause = "oom"
	// CauseCPUExceeded: a CPU time limit message (Cloudflare texts; workerd itself
	// enforces no CPU limit).
	CauseCPUExceeded Cause = "cpu_exceeded"
	// CauseCloneRefused: structured clone refused a value ("Cannot deserialize cloned
	// data", "could not be cloned").
	CauseCloneRefused Cause = "clone_refused"
	// CauseRPCTimeout: a timeout ("TimeoutError", "timed out", "timeout").
	CauseRPCTimeout Cause = "rpc_timeout"
	// CauseSubrequestCap: "Too many subrequests."
	CauseSubrequestCap Cause = "subrequest_cap"
	// CauseDynamicWorkerCap: "too many concurrent dynamic workers".
	CauseDynamicWorkerCap Cause = "dynamic_worker_cap"
	// CauseCondemnation: the platform condemned the object ("condemned").
	CauseCondemnation Cause = "condemnation"
	// CauseHardEvict: hard eviction — "hard evict" in a message, or the kubelet evicted
	// the pod (pod.status.reason Evicted).
	CauseHardEvict Cause = "hard_evict"
	// CauseStartupError: a Worker's module threw while workerd loaded it
	// ("service <name>: Uncaught ..."); workerd exits 1.
	CauseStartupError Cause = "startup_error"
	// CauseConfigError: workerd refused the config ("service <name>: Worker must
	// specify compatibilityDate.", an experimental flag without --experimental, a
	// capnp parse error); workerd exits 1.
	CauseConfigError Cause = "config_error"
	// CauseOutboundDenied: the Worker connected (fetch() or connect()) to an address its
	// outbound policy does not allow: workerd's "connecting to <addr> is not allowed"
	// (docs/outbound.md). The script sees only "internal error; reference = <id>"; the
	// log line carries the same id as wdErrId.
	CauseOutboundDenied Cause = "outbound_denied"
	// CauseImageLinkOutside: the pod's image-check init container refused an image
	// volume (spec.source.image or spec.assets.image) holding a symbolic link out of
	// it, absolute or relative ("... is a symbolic link out of its image volume ...",
	// ImageLinkPhrase; internal/imagecheck): workerd would read the file it names. The
	// pod does not start; the evidence names the field, the file and its target.
	CauseImageLinkOutside Cause = "image_link_outside"
	// CauseUnknown: nothing matched; keep the message and widen the rules.
	CauseUnknown Cause = "unknown"
)

// Causes lists every Cause: classifyError's in its order, outbound_denied, then
// startup_error, config_error and image_link_outside.
var Causes = []Cause{CauseSQLiteNoMem, CauseSQLiteFull, CauseOOM, CauseCPUExceeded, CauseCloneRefused, CauseRPCTimeout, CauseSubrequestCap, CauseDynamicWorkerCap, CauseCondemnation, CauseHardEvict, CauseOutboundDenied, CauseStartupError, CauseConfigError, CauseImageLinkOutside, CauseUnknown}

// ImageLinkPhrase is in every line internal/imagecheck prints for a refused link;
// Diagnose reads a line holding it as image_link_outside.
const ImageLinkPhrase = "is a symbolic link out of its image volume"

// rule matches a lower-cased message: any of its substrings or regexps.
type rule struct {
	sub []string
	re  []*regexp.Regexp
	all []string // every one of these substrings (an extra alternative)
}

func (r rule) match(m string) bool {
	for _, s := range r.sub {
		if strings.Contains(m, s) {
			return true
		}
	}
	for _, re := range r.re {
		if re.MatchString(m) {
			return true
		}
	}
	if len(r.all) > 0 {
		for _, s := range r.all {
			if !strings.Contains(m, s) {
				return false
			}
		}
		return true
	}
	return false
}

type causeRule struct {
	cause Cause
	rule
}

// heapRule is the V8 heap exhaustion signature (V8's fatal OOM texts; observed with the
// pinned workerd in this package's tests).
var heapRule = rule{sub: []string{"javascript heap out of memory", "reached heap limit", "last resort; gc in old space requested"}}

// heapFatalRule is the part of heapRule that is V8's fatal line itself (not the GC
// trailer); Diagnose prefers it as evidence.
var heapFatalRule = rule{sub: []string{"javascript heap out of memory", "reached heap limit"}}

// causeRules is the ordered message table; the first matching rule wins. Mirrored in
// internal/shim/failure.js (CAUSE_RULES).
var causeRules = []causeRule{
	{CauseSQLiteNoMem, rule{sub: []string{"sqlite_nomem"}}},
	{CauseSQLiteFull, rule{sub: []string{"sqlite_full", "database or disk is full"}}},
	{CauseOOM, heapRule},
	{CauseOOM, rule{
		sub: []string{"exceededmemory", "memory limit exceeded", "memory limit would be exceeded"},
		re:  []*regexp.Regexp{regexp.MustCompile(`exceeded (?:its )?memory limit`)},
		all: []string{"memory limit", "reset"},
	}},
	{CauseSQLiteNoMem, rule{sub: []string{"out of memory"}}},
	{CauseCloneRefused, rule{sub: []string{"deserialize cloned data", "could not be cloned"}}},
	{CauseSubrequestCap, rule{sub: []string{"too many subrequests"}}},
	{CauseDynamicWorkerCap, rule{sub: []string{"too many concurrent dynamic workers"}}},
	{CauseCPUExceeded, rule{sub: []string{"cpu time limit", "exceeded cpu limit", "exceededcpu"}}},
	{CauseRPCTimeout, rule{sub: []string{"timeouterror"}, re: []*regexp.Regexp{regexp.MustCompile(`\btimed?\s*out\b`)}}},
	{CauseCondemnation, rule{sub: []string{"condemned"}}},
	{CauseHardEvict, rule{sub: []string{"hard evict"}}},
	{CauseOutboundDenied, rule{re: []*regexp.Regexp{regexp.MustCompile(`connecting to \S+ is not allowed`)}}},
}

// ClassifyMessage maps one message (an error's text or a log line; case is ignored) to
// a Cause by the first matching rule of the ordered table (`classifyError`'s, with
// sqlite_full split from sqlite_nomem: their remedies differ); CauseUnknown
// when nothing matches or msg is empty.
func ClassifyMessage(msg string) Cause {
	m := strings.ToLower(msg)
	if m == "" {
		return CauseUnknown
	}
	for _, r := range causeRules {
		if r.match(m) {
			return r.cause
		}
	}
	return CauseUnknown
}

// ClassifyError is ClassifyMessage over the messages of err's whole cause chain
// (errors.Unwrap, including multi-error Unwrap() []error), joined with "; ".
// CauseUnknown for nil.
func ClassifyError(err error) Cause {
	var msgs []string
	walk(err, func(e error) bool { msgs = append(msgs, linkMessage(e)); return true })
	return ClassifyMessage(strings.Join(msgs, "; "))
}

// overloadRule: the Durable Object and account load-shedding texts of Cloudflare's DO
// troubleshooting page (https://developers.cloudflare.com/durable-objects/observability/troubleshooting/).
var overloadRule = rule{sub: []string{
	"durable object is overloaded",
	"too much load on durable objects",
	"too many concurrent storage operations",
}}

type classRule struct {
	class Class
	rule
}

// classRules: prose signatures of the transient classes, matched against the joined
// chain in this order (`classifyDoCall`'s transient texts plus the connection texts of
// https://developers.cloudflare.com/durable-objects/observability/troubleshooting/). Mirrored in internal/shim/failure.js (CLASS_RULES).
var classRules = []classRule{
	{ClassSupersededIsolate, rule{sub: []string{"reset because its code was updated", "this script has been upgraded"}}},
	{ClassConnectionLost, rule{sub: []string{"network connection lost", "this durable object instance is no longer active", "durable object connection closed because the object was reset"}}},
	{ClassStorageReset, rule{
		sub: []string{"durable object storage caused object to be reset"},
		re:  []*regexp.Regexp{regexp.MustCompile(`storage operation exceeded timeout which caused (?:the )?object to be reset`)},
	}},
}

// Retryabler is implemented by errors that carry the runtime's `.retryable` flag
// (JSError does).
type Retryabler interface{ Retryable() bool }

// Overloader is implemented by errors that carry the runtime's `.overloaded` flag
// (JSError does).
type Overloader interface{ Overloaded() bool }

// ClassifyCall classifies one failed Durable Object call (`classifyDoCall`).
// It walks err's cause chain (errors.Unwrap and Unwrap() []error, depth-first, at most
// maxChain links). Any link that is overloaded — Overloaded() true or a load-shedding
// text — makes the answer ClassOverloaded, whatever else the chain says. Otherwise the
// joined messages are matched against superseded_isolate, connection_lost and
// storage_reset in that order (a wrapper error keeps the prose but drops the flags);
// then any link with Retryable() true gives ClassRetryableFlag; else ClassPermanent.
// A nil err gives "" (no failure).
func ClassifyCall(err error) Class {
	if err == nil {
		return ""
	}
	overloaded, flagged := false, false
	var msgs []string
	walk(err, func(e error) bool {
		msg := linkMessage(e)
		if o, ok := e.(Overloader); (ok && o.Overloaded()) || overloadRule.match(strings.ToLower(msg)) {
			overloaded = true
			return false
		}
		if r, ok := e.(Retryabler); ok && r.Retryable() {
			flagged = true
		}
		msgs = append(msgs, msg)
		return true
	})
	if overloaded {
		return ClassOverloaded
	}
	chain := strings.ToLower(strings.Join(msgs, "; "))
	for _, r := range classRules {
		if r.match(chain) {
			return r.class
		}
	}
	if flagged {
		return ClassRetryableFlag
	}
	return ClassPermanent
}

// maxChain bounds the cause-chain walk (a cycle guard: Go errors are not always
// comparable, so links are counted instead of remembered).
const maxChain = 64

// walk visits err and its causes depth-first, pre-order, until visit returns false or
// maxChain links were visited.
func walk(err error, visit func(error) bool) {
	n := 0
	var rec func(error) bool
	rec = func(e error) bool {
		if e == nil {
			return true
		}
		if n >= maxChain {
			return false
		}
		n++
		if !visit(e) {
			return false
		}
		switch u := e.(type) {
		case interface{ Unwrap() []error }:
			for _, c := range u.Unwrap() {
				if !rec(c) {
					return false
				}
			}
		case interface{ Unwrap() error }:
			return rec(u.Unwrap())
		}
		return true
	}
	rec(err)
}

// linkMessage is the text of one link: JSError's own message (without its causes),
// else Error().
func linkMessage(e error) string {
	if js, ok := e.(*JSError); ok {
		return js.Message
	}
	return e.Error()
}
