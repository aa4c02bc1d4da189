package cronschedule

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// The manager processes of TestExactlyOnceAcrossLeaderFailover are this test binary
// re-executed with these variables set (TestMain runs haManager instead of the tests).
const (
	haEnvRole        = "CRON_HA_ROLE" // "manager"
	haEnvKubeconfig  = "CRON_HA_KUBECONFIG"
	haEnvIdentity    = "CRON_HA_IDENTITY"
	haEnvTriggerPort = "CRON_HA_TRIGGER_PORT"
)

// Leader election timing of the test's managers (the manager's defaults are 15 s / 10 s
// / 2 s): a killed leader's Lease expires after haLeaseDuration, and the standby, which
// retries every haRetryPeriod, takes over well before the next minute's slot.
const (
	haLeaseDuration = 4 * time.Second
	haRenewDeadline = 3 * time.Second
	haRetryPeriod   = time.Second
	// haLeaderElectionID is the manager's Lease name (cmd/workerd-operator/manager.go).
	haLeaderElectionID = "workerd-operator.fleet.workerd-operator.io"
)

func TestMain(m *testing.M) {
	if os.Getenv(haEnvRole) == "manager" {
		if err := haManager(); err != nil {
			fmt.Fprintln(os.Stderr, "cron HA manager:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// haManager is one manager process as cmd/workerd-operator/manager.go wires the dispatcher: a
// controller-runtime manager with leader election (Lease in namespace default) running
// the Dispatcher on the cached client, with the test's trigger port and a short lease.
// It prints "elected <identity>" on stdout when it becomes the leader, and exits when
// its parent (the test) is gone.
func haManager() error {
	identity := os.Getenv(haEnvIdentity)
	port, err := strconv.Atoi(os.Getenv(haEnvTriggerPort))
	if err != nil {
		return fmt.Errorf("%s: %w", haEnvTriggerPort, err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv(haEnvKubeconfig))
	if err != nil {
		return err
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	lease, renew, retry := haLeaseDuration, haRenewDeadline, haRetryPeriod
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  testenv.Scheme(),
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  "0",
		LeaderElection:          true,
		LeaderElectionID:        haLeaderElectionID,
		LeaderElectionNamespace: "default",
		LeaseDuration:           &lease,
		RenewDeadline:           &renew,
		RetryPeriod:             &retry,
	})
	if err != nil {
		return err
	}
	if err := mgr.Add(NewDispatcher(mgr.GetClient(), DispatcherOptions{
		APIReader:   mgr.GetAPIReader(),
		Recorder:    mgr.GetEventRecorder("cron-dispatcher"),
		Log:         ctrl.Log.WithName("cron-dispatcher"),
		TriggerPort: port,
		Identity:    identity,
		// as the manager (cmd/workerd-operator/manager.go): slots claimed 10 s ahead, confirmed in a
		// dispatch record next to the leader-election Lease
		DispatchRecord: types.NamespacedName{Namespace: "default", Name: "cron-ha-dispatch"},
	})); err != nil {
		return err
	}
	ctx := ctrl.SetupSignalHandler()
	go func() {
		select {
		case <-mgr.Elected():
			fmt.Println("elected", identity)
		case <-ctx.Done():
		}
	}()
	parent := os.Getppid()
	go func() {
		for range time.Tick(500 * time.Millisecond) {
			if os.Getppid() != parent {
				os.Exit(2) // the test binary died: do not outlive it
			}
		}
	}()
	return mgr.Start(ctx)
}

// haProc is one manager process started by the test.
type haProc struct {
	identity string
	cmd      *exec.Cmd
	log      string
	elected  chan time.Time // receives when the process prints "elected"
	exited   chan struct{}
}

func startHAManager(t *testing.T, kubeconfig, identity string, port int) *haProc {
	t.Helper()
	p := &haProc{identity: identity, log: filepath.Join(t.TempDir(), identity+".log"),
		elected: make(chan time.Time, 1), exited: make(chan struct{})}
	logf, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(os.Args[0])
	p.cmd.Env = append(os.Environ(), haEnvRole+"=manager", haEnvKubeconfig+"="+kubeconfig,
		haEnvIdentity+"="+identity, haEnvTriggerPort+"="+strconv.Itoa(port))
	p.cmd.Stderr = logf
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			fmt.Fprintln(logf, sc.Text())
			if strings.HasPrefix(sc.Text(), "elected ") {
				p.elected <- time.Now()
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		_ = p.cmd.Wait()
		logf.Close()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			if b, err := os.ReadFile(p.log); err == nil {
				t.Logf("%s log (last 4 KiB):\n%s", identity, tail(b, 4096))
			}
		}
	})
	return p
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// kubeconfig writes a kubeconfig of an envtest admin user for the manager processes.
func (f *fleet) kubeconfig(t *testing.T) string {
	t.Helper()
	u, err := f.env.AddUser(envtest.User{Name: "cron-ha", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := u.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// historyRow returns the history row of slot, if recorded with an outcome.
func historyRow(cs *fleetv1alpha1.CronSchedule, slot time.Time) *fleetv1alpha1.CronEvent {
	for i, ev := range cs.Status.History {
		if ev.ScheduledTime.Time.Equal(slot) && ev.Outcome != "" {
			return &cs.Status.History[i]
		}
	}
	return nil
}

// waitForRow polls the CronSchedule until slot has a history row, for at most a
// minute past the slot.
func (f *fleet) waitForRow(t *testing.T, cs *fleetv1alpha1.CronSchedule, slot time.Time) *fleetv1alpha1.CronEvent {
	t.Helper()
	for {
		if ev := historyRow(f.get(t, cs), slot); ev != nil {
			return ev
		}
		if time.Now().After(slot.Add(time.Minute)) {
			t.Fatalf("slot %s: no history row a minute after it; history %+v", slot.UTC().Format(time.RFC3339), f.get(t, cs).Status.History)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// Issue 8 "done" 4: two manager processes with leader election; the leader is killed
// (SIGKILL, so it cannot release its Lease) during a minute; over five minutes (six
// slots of "* * * * *") the user's scheduled() handler, which records every call, sees
// each slot exactly once, and the slots after the kill are dispatched by the other
// process.
//
// The kill is at :57, the worst moment for claim-ahead: the leader has already claimed
// the next slot (10 s ahead) and dies before confirming it. The killed leader's Lease
// expires haLeaseDuration after its last renewal and the standby acquires it within
// haRetryPeriod, at about :01-:02 after the slot. On its first pass it fences the old
// leader in the dispatch record; the slot the old leader claimed but never confirmed
// is in doubt, so the standby claims it again and dispatches it, late, once.
// startingDeadlineSeconds: 50 keeps a slot that passed during a slower takeover (a
// loaded machine) in the catch-up window (50 s is under one interval, so a deadline
// can never cover two slots). Why no slot runs twice: a slot is either claimed in the
// CronSchedule's status as it comes due, or claimed ahead and confirmed in the dispatch
// record by a dispatcher not fenced there, both with optimistic concurrency, so a slot
// the old leader dispatched is not dispatched again. Real time, about six minutes;
// skipped with -short.
func TestExactlyOnceAcrossLeaderFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("real time: about six minutes (two manager processes, a leader killed mid-minute)")
	}
	const (
		ns    = "ha"
		expr  = "* * * * *"
		slots = 6
	)
	f := startFleet(t)
	f.namespace(t, ns)
	kubeconfig := f.kubeconfig(t)
	procs := map[string]*haProc{}
	for _, id := range []string{"manager-a", "manager-b"} {
		procs[id] = startHAManager(t, kubeconfig, id, f.port)
	}
	select {
	case <-procs["manager-a"].elected:
	case <-procs["manager-b"].elected:
	case <-time.After(2 * time.Minute):
		t.Fatal("no manager became the leader within two minutes")
	}

	// Create the CronSchedule between :05 and :50 of a minute: at least 10 s before
	// its first slot, so the leader has seen it by then, and not within the second of
	// a slot (creationTimestamp has whole seconds; a slot in the creation's second
	// counts as after it for the dispatcher).
	for s := time.Now().Second(); s < 5 || s > 50; s = time.Now().Second() {
		time.Sleep(time.Second)
	}
	spec := workerSpec(expr)
	deadline, history := int64(50), int32(2*slots)
	spec.StartingDeadlineSeconds = &deadline
	spec.HistoryLimit = &history
	cs := f.cronSchedule(t, ns, "ha", spec)
	t0 := firstSlotAfterCreation(t, cs, expr)
	slot := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Minute) }

	first := f.waitForRow(t, cs, slot(0))
	var leader, standby *haProc
	for _, p := range procs {
		if strings.Contains(first.Message, "(dispatcher "+p.identity+")") {
			leader = p
		} else {
			standby = p
		}
	}
	if leader == nil {
		t.Fatalf("history row %q names neither manager", first.Message)
	}

	const killedAfter = 2 // killed 3 s before slot 3, which it has claimed ahead
	killAt := slot(killedAfter + 1).Add(-3 * time.Second)
	time.Sleep(time.Until(killAt))
	if err := leader.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-leader.exited
	killed := time.Now()
	select {
	case at := <-standby.elected:
		t.Logf("%s killed at %s; %s took over %.1f s later", leader.identity, killed.UTC().Format(time.RFC3339Nano), standby.identity, at.Sub(killed).Seconds())
	case <-time.After(time.Until(slot(killedAfter + 1).Add(time.Duration(deadline) * time.Second))):
		t.Fatalf("%s did not take over within the starting deadline of slot %d", standby.identity, killedAfter+1)
	}

	f.waitForRow(t, cs, slot(slots-1))
	_ = standby.cmd.Process.Signal(syscall.SIGTERM)
	<-standby.exited

	// Every slot exactly once, and nothing else.
	counts := map[string]int{}
	for _, c := range f.allCalls(t) {
		if c.Cron == expr {
			counts[time.UnixMilli(c.ScheduledTime).UTC().Format(time.RFC3339)]++
		}
	}
	want := map[string]bool{}
	for i := 0; i < slots; i++ {
		s := slot(i).UTC().Format(time.RFC3339)
		want[s] = true
		if counts[s] != 1 {
			t.Errorf("slot %d (%s): scheduled() called %d times, want exactly once", i, s, counts[s])
		}
	}
	for s, n := range counts {
		if !want[s] {
			t.Errorf("scheduled() called %d times for %s, outside the slots %s..%s", n, s, rfc(t0)[0], rfc(slot(slots - 1))[0])
		}
	}
	// The dispatch record shows the old leader fenced, having confirmed slot 2 and not
	// slot 3 (which it had claimed ahead).
	var lease coordinationv1.Lease
	if err := f.c.Get(context.Background(), types.NamespacedName{Namespace: "default", Name: "cron-ha-dispatch"}, &lease); err != nil {
		t.Fatal(err)
	}
	rec := dispatchRecord{}
	if err := json.Unmarshal([]byte(lease.Annotations[DispatchRecordAnnotation]), &rec); err != nil {
		t.Fatal(err)
	}
	for id, e := range rec {
		if strings.HasPrefix(id, leader.identity+"-") && (!e.Fenced || !e.Through.Equal(slot(killedAfter))) {
			t.Errorf("dispatch record entry %s = %+v, want fenced through slot %d (%s)", id, e, killedAfter, slot(killedAfter))
		}
	}
	// The history says who dispatched what: the first leader up to the kill, the
	// other process after it, every run ok.
	got := f.get(t, cs)
	for i := 0; i < slots; i++ {
		ev := historyRow(got, slot(i))
		by := leader
		if i > killedAfter {
			by = standby
		}
		switch {
		case ev == nil:
			t.Errorf("slot %d: no history row", i)
		case ev.Outcome != fleetv1alpha1.CronOutcomeOK:
			t.Errorf("slot %d: outcome %q (%s), want ok", i, ev.Outcome, ev.Message)
		case !strings.Contains(ev.Message, "(dispatcher "+by.identity+")"):
			t.Errorf("slot %d: %q, want dispatched by %s", i, ev.Message, by.identity)
		}
	}
	t.Logf("calls per slot: %v", counts)
}
