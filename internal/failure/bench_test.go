package failure

import "testing"

// BenchmarkDiagnose: one classification of a V8 heap-exhaustion log tail (the largest
// vector text, workerd-facts.md §6).
func BenchmarkDiagnose(b *testing.B) {
	tm := Termination{ExitCode: 1, Reason: "Error", Message: "\n<--- Last few GCs --->\n\n[1:0x1]  1254 ms: Mark-Compact (reduce) 15.5 (16.6) -> 15.5 (16.6) MB, last resort; GC in old space requested\n\nworkerd/jsg/setup.c++:44: fatal: V8 fatal error; location = Reached heap limit; message = : allocation failed: JavaScript heap out of memory\n*** Received signal #6: Aborted\n"}
	for b.Loop() {
		if c, _ := Diagnose(tm); c != CauseOOM {
			b.Fatal("wrong cause")
		}
	}
}

// BenchmarkClassifyCall: a three-link chain that ends in a transient text.
func BenchmarkClassifyCall(b *testing.B) {
	err := &JSError{Message: "step 3 failed", Cause: &JSError{Message: "callShard failed", Cause: &JSError{Message: "Network connection lost.", IsRetryable: true}}}
	for b.Loop() {
		if ClassifyCall(err) != ClassConnectionLost {
			b.Fatal("wrong class")
		}
	}
}
