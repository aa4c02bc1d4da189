package testenv

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// TallyModule is the Worker of the cluster suites' moves under load (resharding,
// drains, node loss): GET /inc?o=[&alarm=ms] increments object o's counter and answers
// {n, token}, the token drawn once per instance of the object, and sets an alarm ms
// ahead when it has none and none ran; GET /get?o= reads the counter, GET /alarms?o=
// how many times its alarm ran and the one pending. Its class is Tally, bound as TALLY.
const TallyModule = `import { DurableObject } from "cloudflare:workers";
export class Tally extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.token = crypto.randomUUID();
  }
  async inc(alarmIn) {
    const n = ((await this.ctx.storage.get("n")) ?? 0) + 1;
    await this.ctx.storage.put("n", n);
    if (alarmIn && (await this.ctx.storage.getAlarm()) === null && !(await this.ctx.storage.get("fired"))) {
      await this.ctx.storage.setAlarm(Date.now() + alarmIn);
    }
    return { n, token: this.token };
  }
  async get() {
    return (await this.ctx.storage.get("n")) ?? 0;
  }
  async alarms() {
    return { fired: (await this.ctx.storage.get("fired")) ?? 0, pending: await this.ctx.storage.getAlarm() };
  }
  async alarm() {
    await this.ctx.storage.put("fired", ((await this.ctx.storage.get("fired")) ?? 0) + 1);
  }
}
export default {
  async fetch(req, env) {
    const u = new URL(req.url), o = "o" + u.searchParams.get("o");
    if (u.pathname === "/inc") return Response.json(await env.TALLY.getByName(o).inc(Number(u.searchParams.get("alarm") ?? 0)));
    if (u.pathname === "/alarms") return Response.json(await env.TALLY.getByName(o).alarms());
    if (u.pathname === "/get") return Response.json(await env.TALLY.getByName(o).get());
    return new Response("no such path", { status: 404 });
  },
};`

// TallyAnswer is one acknowledged increment: the count, the token of the object's
// instance that made it, and when the answer arrived.
type TallyAnswer struct {
	N     int       `json:"n"`
	Token string    `json:"token"`
	At    time.Time `json:"-"`
}

// TallyLoad sends GET /inc for a random object at a steady rate, each call from its own
// goroutine (a call may wait out a move), and keeps every acknowledged answer by object.
type TallyLoad struct {
	Sent, Failed atomic.Int64
	// AlarmMs, while not 0, makes each call set an alarm that far ahead (Alarmed).
	AlarmMs atomic.Int64

	url       string
	objects   int
	onFailure func()
	mu        sync.Mutex
	answers   map[int][]TallyAnswer
	alarmed   map[int]bool
	failures  []string
	wg        sync.WaitGroup
	stop      chan struct{}
	once      sync.Once
}

// StartTallyLoad calls url (a TallyModule Worker) rate times a second, on objects
// 0..objects-1; onFailure (nil: none) runs once, at the first failed call, while the
// pods that saw it live.
func StartTallyLoad(url string, rate, objects int, onFailure func()) *TallyLoad {
	l := &TallyLoad{url: url, objects: objects, onFailure: onFailure,
		answers: map[int][]TallyAnswer{}, alarmed: map[int]bool{}, stop: make(chan struct{})}
	c := &http.Client{Timeout: 150 * time.Second}
	go func() {
		start, every := time.Now(), time.Second/time.Duration(rate)
		for i := 0; ; i++ {
			select {
			case <-l.stop:
				return
			case <-time.After(time.Until(start.Add(time.Duration(i) * every))):
			}
			l.wg.Add(1)
			go l.call(c)
		}
	}()
	return l
}

func (l *TallyLoad) call(c *http.Client) {
	defer l.wg.Done()
	o := rand.IntN(l.objects)
	l.Sent.Add(1)
	alarm := l.AlarmMs.Load()
	a, err := l.inc(c, o, alarm)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		if l.Failed.Add(1) == 1 && l.onFailure != nil {
			go l.onFailure()
		}
		l.failures = append(l.failures, fmt.Sprintf("%s o%d: %v", time.Now().Format("15:04:05.000"), o, err))
		return
	}
	a.At = time.Now()
	l.answers[o] = append(l.answers[o], a)
	if alarm > 0 {
		l.alarmed[o] = true
	}
}

func (l *TallyLoad) inc(c *http.Client, o int, alarm int64) (TallyAnswer, error) {
	var a TallyAnswer
	resp, err := c.Get(fmt.Sprintf("%s/inc?o=%d&alarm=%d", l.url, o, alarm))
	if err != nil {
		return a, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return a, fmt.Errorf("%s: %.400s", resp.Status, b)
	}
	return a, json.Unmarshal(b, &a)
}

// Stop stops the load and waits for the calls under way; a second call does nothing.
// The accessors below are for after Stop.
func (l *TallyLoad) Stop() {
	l.once.Do(func() { close(l.stop) })
	l.wg.Wait()
}

// Answers are the acknowledged increments by object.
func (l *TallyLoad) Answers() map[int][]TallyAnswer { return l.answers }

// Alarmed are the objects called while AlarmMs was set.
func (l *TallyLoad) Alarmed() map[int]bool { return l.alarmed }

// Failures are the first n failed calls, with their times.
func (l *TallyLoad) Failures(n int) []string { return l.failures[:min(len(l.failures), n)] }

// AnsweredAgain is the first answer, in the order of as, from an instance that had
// given way to a later one (two live copies of an object would interleave); nil: none.
func AnsweredAgain(as []TallyAnswer) *TallyAnswer {
	done, cur := map[string]bool{}, ""
	for i, a := range as {
		if a.Token == cur {
			continue
		}
		if done[a.Token] {
			return &as[i]
		}
		done[cur], cur = cur != "", a.Token
	}
	return nil
}
