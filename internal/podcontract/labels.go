package podcontract

import "strings"

// OperatorLabelPrefix starts every label key of the operator's own.
const OperatorLabelPrefix = "fleet.workerd-operator.io/"

// IsOperatorLabel reports whether key is one the operator selects or admits pods by
// (its own prefix, or a well-known key it sets): spec.pod.labels may not set it, or a
// Worker's pods would join another object's Service, triggers or NetworkPolicy peers.
func IsOperatorLabel(key string) bool {
	switch key {
	case LabelName, LabelInstance, LabelManagedBy, LabelAppComponent:
		return true
	}
	return strings.HasPrefix(key, OperatorLabelPrefix) || strings.HasPrefix(key, LabelDispatcherPrefix)
}
