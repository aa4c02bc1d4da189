package workflows

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/workerd-operator/workerd-operator/internal/limits"
	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
)

// The run link: a run is one WebSocket between the engine and the runner worker
// (GET /run with Upgrade on workerd's workflows socket, the connection an HTTP /run
// request would take). The engine sends the job first; the runner then sends its step
// calls and attempt reports, {"call": n, "op": "step" | "attempt", ...StepRequest or
// AttemptReport}, each answered by {"call": n, "answer": StepAnswer} or {"call": n,
// "error": message} (the runner ends the run as aborted), and ends with
// {"op": "outcome", ...runResult}. Per step that is a message each way on an open
// connection where HTTP took a subrequest of workerd each way. Answers carry "t", the
// engine's clock (ms) when sent; the runner's next message carries "lag", how late it
// handled the last answer (admit.go). The longest message the
// engine sends is a step result or the params (1 MiB each) with their envelope; the
// pinned workerd takes WebSocket messages of up to 32 MiB (caps_test.go sends 1 MiB
// both ways).

// linkWriteTimeout bounds one message's write to the runner.
const linkWriteTimeout = time.Minute

// runLink is one run's WebSocket.
type runLink struct {
	e    *Engine
	job  *runJob
	conn *websocket.Conn
	wmu  sync.Mutex
}

// runnerSocketURL is the runner's /run as a WebSocket URL.
func runnerSocketURL(runnerURL string) string {
	if rest, ok := strings.CutPrefix(runnerURL, "https://"); ok {
		return "wss://" + rest + "/run"
	}
	return "ws://" + strings.TrimPrefix(runnerURL, "http://") + "/run"
}

// callRunner runs job on the runner over a run link and returns its outcome: an error
// when the runner could not be reached or the link broke (the run is dispatched again).
func (e *Engine) callRunner(job *runJob) (*runResult, error) {
	conn, resp, err := e.dialer.DialContext(e.ctx, runnerSocketURL(e.o.RunnerURL), nil)
	if err != nil {
		if resp != nil {
			err = fmt.Errorf("%w (runner answered %d)", err, resp.StatusCode)
		}
		return nil, err
	}
	defer conn.Close()
	stop := context.AfterFunc(e.ctx, func() { conn.Close() })
	defer stop()
	// The outcome carries the run's output, which is persisted like a step's result.
	conn.SetReadLimit(e.lim(limits.WorkflowStepResultBytes) + envelope)
	l := &runLink{e: e, job: job, conn: conn}
	job.T = msNow()
	if err := l.send(job); err != nil {
		return nil, err
	}
	return l.serve()
}

// serve answers the runner's calls, each on its own goroutine (a run's step.do calls
// may be concurrent), until the outcome arrives; calls still in flight finish first.
func (l *runLink) serve() (*runResult, error) {
	var calls sync.WaitGroup
	defer calls.Wait()
	for {
		_, data, err := l.conn.ReadMessage()
		if errors.Is(err, websocket.ErrReadLimit) {
			return l.tooLarge(), nil
		}
		if err != nil {
			return nil, fmt.Errorf("run link: %w", err)
		}
		var head struct {
			Call uint64   `json:"call"`
			Op   string   `json:"op"`
			Lag  *float64 `json:"lag"`
		}
		if err := json.Unmarshal(data, &head); err != nil {
			return nil, fmt.Errorf("runner message %.300q is not JSON: %w", data, err)
		}
		if head.Lag != nil && l.e.adm.note(*head.Lag, int(l.e.inFlight.Load()), time.Now()) {
			l.e.repump()
		}
		if head.Op == "outcome" {
			var res runResult
			if err := json.Unmarshal(data, &res); err != nil || res.Outcome == "" {
				return nil, fmt.Errorf("runner message %.300q is not a run outcome", data)
			}
			return &res, nil
		}
		calls.Add(1)
		go func() {
			defer calls.Done()
			ans, err := l.call(head.Op, data)
			l.answer(head.Call, ans, err)
		}()
	}
}

// tooLarge is the outcome of a run whose runner sent a message over the read limit:
// its output (the runner clips its step reports to fit). The same answer would come
// back on every dispatch: the run ends here.
func (l *runLink) tooLarge() *runResult {
	e, max := l.e, l.e.lim(limits.WorkflowStepResultBytes)+envelope
	return &runResult{Outcome: "errored", Error: &api.ErrorInfo{Name: "Error", Message: fmt.Sprintf(
		"Workflow %q output is too large: the runner's answer is over %d bytes; the output may take %d (%s)",
		l.job.Workflow, max, e.lim(limits.WorkflowStepResultBytes), e.cite(limits.WorkflowStepResultBytes))}}
}

// call answers one step call or attempt report of the link's run, with the body caps
// of the runner protocol's HTTP routes.
func (l *runLink) call(op string, data []byte) (*StepAnswer, error) {
	var c bodyCap
	var v any
	var r StepRequest
	var a AttemptReport
	switch op {
	case "step":
		c, v = capStep, &r
	case "attempt":
		c, v = capAttempt, &a
	default:
		return nil, api.Errorf(400, "run.unknown_op", "run link: unknown op %q", op)
	}
	if max, why := l.e.capOf(c); int64(len(data)) > max {
		return nil, api.Errorf(413, "request.too_large", "run link %s of %d bytes; the limit is %s", op, len(data), why)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return nil, api.Errorf(400, "request.invalid_json", "run link %s: %v", op, err)
	}
	j := l.job
	if op == "step" {
		r.Workflow, r.ID, r.RunID = j.Workflow, j.ID, j.RunID
		return l.e.Step(r)
	}
	a.Workflow, a.ID, a.RunID = j.Workflow, j.ID, j.RunID
	return l.e.Attempt(a)
}

// answer sends call n's answer, or its error.
func (l *runLink) answer(n uint64, ans *StepAnswer, err error) {
	t := msNow()
	msg := map[string]any{"call": n, "answer": ans, "t": t}
	if err != nil {
		msg = map[string]any{"call": n, "error": err.Error(), "t": t}
	}
	_ = l.send(msg) // a broken link ends the run: serve sees it
}

// send writes v as one message.
func (l *runLink) send(v any) error {
	b, err := marshalNoEscape(v)
	if err != nil {
		return err
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	_ = l.conn.SetWriteDeadline(time.Now().Add(linkWriteTimeout))
	return l.conn.WriteMessage(websocket.TextMessage, b)
}

// msNow is the clock in ms, as the runner's Date.now() reads it.
func msNow() float64 { return float64(time.Now().UnixMicro()) / 1000 }

// marshalNoEscape is v's JSON without HTML escaping (stored JSON goes out as it came in).
func marshalNoEscape(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// newRunnerDialer dials the runner's socket.
func newRunnerDialer() *websocket.Dialer {
	return &websocket.Dialer{HandshakeTimeout: 30 * time.Second, ReadBufferSize: 16 << 10, WriteBufferSize: 16 << 10}
}
