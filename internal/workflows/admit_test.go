package workflows

import (
	"math"
	"testing"
	"time"
)

// The admission limit (admit.go): below admitFloor runs always start; lags under half
// of admitLag double the limit each window while it holds runs back, lags over admitLag
// cut it by a fifth down to the floor, and runs that report no lag (waiting for I/O)
// let twice as many in.
func TestAdmission(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var a admission
	for running := 0; running < admitFloor; running++ {
		if !a.take(running, t0) {
			t.Fatalf("take(%d) below the floor %d refused", running, admitFloor)
		}
	}
	// No lag has come yet: the runs in flight count as waiting for I/O.
	if !a.take(admitFloor, t0) || a.limit != 2*admitFloor {
		t.Fatalf("no lag yet: limit %v, want %d", a.limit, 2*admitFloor)
	}
	// A window of small lags while the limit is reached doubles it.
	a.note(0.1*admitLag, 8, at(10))
	a.note(0.2*admitLag, 8, at(70))
	if a.limit != 16 {
		t.Fatalf("after a window of lags of 0.1 and 0.2 admitLag at the limit: limit %v, want 16", a.limit)
	}
	if !a.take(15, at(80)) || a.take(16, at(80)) {
		t.Fatalf("limit 16: take(15) and not take(16) expected")
	}
	// Lags around admitLag raise it by one; the same while runs are well under the
	// limit leave it.
	a.note(0.8*admitLag, 16, at(130))
	if a.limit != 17 {
		t.Fatalf("window of 0.8 admitLag at the limit: limit %v, want 17", a.limit)
	}
	a.note(0.1*admitLag, 5, at(190))
	if a.limit != 17 {
		t.Fatalf("window with 5 runs under limit 17: limit %v, want it unchanged", a.limit)
	}
	// Lags over admitLag cut it by a fifth per window, to the floor and not below.
	a.held.Store(true)
	if again := a.note(3*admitLag, 17, at(250)); math.Abs(a.limit-13.6) > 1e-9 || again {
		t.Fatalf("window of 3 admitLag: limit %v (want 13.6), dispatch again %v (want false)", a.limit, again)
	}
	for ms := 310; ms < 2000; ms += 60 {
		a.note(3*admitLag, 17, at(ms))
	}
	if a.limit != admitFloor {
		t.Fatalf("lags of 3 admitLag for 2 s: limit %v, want the floor %d", a.limit, admitFloor)
	}
	// A held dispatch goes on once a window raises the limit over the runs in flight.
	if again := a.note(0.1*admitLag, 4, at(2100)); !again || a.limit != 2*admitFloor {
		t.Fatalf("small lags at the floor: limit %v, dispatch again %v; want %d, true", a.limit, again, 2*admitFloor)
	}
}
