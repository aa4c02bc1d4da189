package webhook

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/workerd-operator/workerd-operator/internal/limits"
)

// CompatFlagsSource is where the compatibility flags the webhook knows come from: the
// CompatibilityFlags schema (src/workerd/io/compatibility-date.capnp) compiled into
// the pinned workerd, whose start-up checks they reproduce (compileCompatibilityFlags:
// "No such compatibility flag", "mutually contradictory", "became the default",
// "is experimental").
const CompatFlagsSource = "the compatibility-date.capnp compiled into workerd " + PinnedWorkerdVersion

// compatField is one field of workerd's CompatibilityFlags struct.
type compatField struct {
	field        string   // the capnp field name
	flags        []string // the flags that set it (enable and/or disable flag)
	enable       string   // the enable flag, when it has an enable date or is on for all dates
	date         string   // YYYY-MM-DD from which the enable flag is the default ("" none)
	experimental string   // the enable flag when the field is $experimental
	allDates     bool     // $compatEnableAllDates: the enable flag is the default for every date
}

// How compatflags_pinned.go was made, and how to redo it when WORKERD_VERSION moves:
// the words that follow "workerd/io/compatibility-date.capnp:CompatibilityFlags" in
// the workerd binary are the schema's field names, each followed by its flag names
// and enable date; a flag's kind (experimental, on for all dates, the enable flag of
// its date) is workerd's own answer to a config that uses it. After a bump,
// TestCompatFlagsMatchWorkerd names every entry workerd disagrees with and every
// schema word that workerd accepts but the table lacks.

// pinnedFlags indexes pinnedCompatFields by flag name.
var pinnedFlags = func() map[string]*compatField {
	m := map[string]*compatField{}
	for i := range pinnedCompatFields {
		for _, f := range pinnedCompatFields[i].flags {
			m[f] = &pinnedCompatFields[i]
		}
	}
	return m
}()

// IsExperimentalFlag reports whether compatibility flag f is experimental in the
// pinned workerd (it needs --experimental; the operator admits it only under the
// custom profile).
func IsExperimentalFlag(f string) bool {
	c, ok := pinnedFlags[f]
	return ok && c.experimental == f
}

// validateCompatibilityFlags checks a Worker's flags as workerd checks them at
// start-up, where each failure makes workerd exit 1 (the pods could never run):
// unknown flags, two flags of one field, and an enable flag that is already the
// default at the compatibilityDate. Experimental flags are refused outside the
// custom profile. The table describes the pinned workerd only: for another
// workerd (spec.runtime.version, or an operator started with another version)
// only the experimental rule applies, with a warning that the rest was not checked.
func validateCompatibilityFlags(c *check, path *field.Path, flags []string, date, version string) {
	for i, f := range flags {
		if IsExperimentalFlag(f) && c.p != limits.Custom {
			c.add(field.Forbidden(path.Index(i), fmt.Sprintf("%q is an experimental workerd compatibility flag; it is allowed only with the custom profile (profile %q; source: %s)", f, c.p, CompatFlagsSource)))
		}
	}
	if len(flags) == 0 {
		return
	}
	if version != PinnedWorkerdVersion {
		c.warn("%s: not checked against workerd %s (the operator knows the flags of workerd %s only); workerd refuses unknown, contradictory and already-default flags at start-up", path, version, PinnedWorkerdVersion)
		return
	}
	_, dateErr := time.Parse(time.DateOnly, date)
	seen := map[string]int{} // capnp field → index of its first flag
	for i, f := range flags {
		fp := path.Index(i)
		cf, ok := pinnedFlags[f]
		if !ok {
			c.add(field.Invalid(fp, f, fmt.Sprintf("is not a compatibility flag of workerd %s, which would refuse to start (\"No such compatibility flag\"; source: %s)", version, CompatFlagsSource)))
			continue
		}
		if j, dup := seen[cf.field]; dup && flags[j] != f {
			c.add(field.Invalid(fp, f, fmt.Sprintf("contradicts spec.compatibilityFlags[%d] %q: both set workerd's %s, and workerd refuses to start (\"Compatibility flags are mutually contradictory\"; source: %s)", j, flags[j], cf.field, CompatFlagsSource)))
			continue
		}
		seen[cf.field] = i
		if f != cf.enable {
			continue
		}
		switch {
		case cf.allDates:
			c.add(field.Invalid(fp, f, fmt.Sprintf("is the default for every compatibility date, and workerd refuses to start when it is given (\"does not need to be specified anymore\"); remove it (source: %s)", CompatFlagsSource)))
		case cf.date != "" && dateErr == nil && date >= cf.date:
			c.add(field.Invalid(fp, f, fmt.Sprintf("became the default as of %s, on or before spec.compatibilityDate %s, and workerd refuses to start when it is given (\"does not need to be specified anymore\"); remove it (source: %s)", cf.date, date, CompatFlagsSource)))
		}
	}
}
