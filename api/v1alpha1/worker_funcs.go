package v1alpha1

// RuntimeVersion is spec.runtime.version: the workerd version the Worker asks for, ""
// for the operator's own.
func (s *WorkerSpec) RuntimeVersion() string {
	if s.Runtime == nil {
		return ""
	}
	return s.Runtime.Version
}
