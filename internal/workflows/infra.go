package workflows

import (
	"errors"

	"github.com/workerd-operator/workerd-operator/internal/failure"
)

// maxInfraReruns bounds the re-runs of one attempt after infrastructure failures;
// past it the failure counts as the attempt's outcome.
const maxInfraReruns = 5

// infraRerun decides that failed attempt r (key ak) is not recorded because the
// infrastructure failed under it, not the step: its error is a superseded isolate, a
// lost connection or a reset storage (failure.ClassifyCall), as when the Worker's code
// is being updated and the pods behind a call are replaced. The run is aborted, the
// engine dispatches it again (Options.DispatchRetry) and the replay runs the same
// attempt number again: the user's retries are not consumed. At most maxInfraReruns
// times per attempt. Called with the run lock held.
func (e *Engine) infraRerun(m *runMem, r AttemptReport, ak string) bool {
	if r.OK || r.NonRetryable || r.Error == nil || m.reruns[ak] >= maxInfraReruns {
		return false
	}
	switch failure.ClassifyCall(errors.New(r.Error.Name + ": " + r.Error.Message)) {
	case failure.ClassSupersededIsolate, failure.ClassConnectionLost, failure.ClassStorageReset:
	default:
		return false
	}
	m.reruns[ak]++
	e.logf("workflows: %s/%s step %q-%d attempt %d failed for an infrastructure reason (%s: %s); running it again, not counted (%d of %d)",
		r.Workflow, r.ID, r.Name, r.N, r.Attempt, r.Error.Name, r.Error.Message, m.reruns[ak], maxInfraReruns)
	return true
}
