package channels

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/workerd-operator/workerd-operator/internal/limits"
)

// DefaultLease is how long a subscription lives without a wait: every wait (while it is
// pending, and for Lease after it returns) and the subscribe itself renew it. A
// subscription whose request ended without unsubscribing is collected when its lease
// lapses, so the channel quota never leaks.
const DefaultLease = 30 * time.Second

// Outcome kinds of Wait.
const (
	OutcomeMessage      = "message"
	OutcomeTimeout      = "timeout"
	OutcomeClosed       = "closed"
	OutcomeDisconnected = "disconnected"
	// OutcomeMessages is WaitBatch's answer: Messages from sequence number Seq on.
	OutcomeMessages = "messages"
)

// Outcome is the result of Wait: Kind is one of the Outcome* constants; Message is set for
// "message", Reason for "closed" and "disconnected".
type Outcome struct {
	Kind     string
	Message  string
	Reason   string
	Messages []string
	Seq      uint64
}

// MarshalJSON renders {"outcome":"message","message":...} (the message even when empty),
// {"outcome":"timeout"}, or {"outcome":"closed"|"disconnected","reason":...}.
func (o Outcome) MarshalJSON() ([]byte, error) {
	switch o.Kind {
	case OutcomeMessage:
		return json.Marshal(struct {
			Kind    string `json:"outcome"`
			Message string `json:"message"`
		}{o.Kind, o.Message})
	case OutcomeMessages:
		return json.Marshal(struct {
			Kind     string   `json:"outcome"`
			Messages []string `json:"messages"`
			Seq      uint64   `json:"seq"`
		}{o.Kind, o.Messages, o.Seq})
	case OutcomeClosed, OutcomeDisconnected:
		return json.Marshal(struct {
			Kind   string `json:"outcome"`
			Reason string `json:"reason"`
		}{o.Kind, o.Reason})
	}
	return json.Marshal(struct {
		Kind string `json:"outcome"`
	}{o.Kind})
}

// Key identifies one Durable Object instance: the namespace (DurableObjectNamespace name
// or the binding's configured namespace) and the object id (hex, ctx.id.toString()).
type Key struct {
	Namespace string
	Object    string
}

func (k Key) String() string { return k.Namespace + "/" + k.Object }

// Options configure a Manager.
type Options struct {
	// Limits are enforced per object instance; zero value means DefaultLimits().
	Limits Limits
	// Lease is the subscription lease (DefaultLease when 0).
	Lease time.Duration
	// DataDir, when set, holds "channels/boots": the boot ids of earlier runs, so a handle
	// of an earlier run is answered REGISTRY_RESTARTED rather than UNKNOWN_HANDLE.
	DataDir string
	// MaxObjects is how many object instances may hold a registry at once
	// (DefaultMaxObjects when 0).
	MaxObjects int
	// Metrics receives gauges and counters; nil means none.
	Metrics *Metrics
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Manager holds the registries of every object instance served by this sidecar. All
// methods are safe for concurrent use.
type Manager struct {
	limits     Limits
	lease      time.Duration
	bootID     string
	tokenKey   [32]byte
	maxObjects int
	metrics    *Metrics
	now        func() time.Time

	mu        sync.Mutex
	objects   map[Key]*registry
	tokens    map[string]Key // instanceToken → object, for FOREIGN_HANDLE
	pastBoots map[string]bool
	mapSize   int    // the most objects since the maps were last copied (shrinkMaps)
	nextID    uint64 // reader ids are unique per boot, across objects
	closed    bool
	waiting   atomic.Int64
	streaming atomic.Int64 // handles running on streams requests (MaxStreams)
	shutdown  chan struct{}
	stopJan   chan struct{}
	janDone   chan struct{}
}

type registry struct {
	key      Key
	token    string
	mu       sync.Mutex
	channels map[string]*channel
	readers  map[uint64]*reader
	freed    bool // no longer in Manager.objects: callers holding it look it up again
}

type channel struct {
	name    string
	readers []*reader // subscribe order
}

type reader struct {
	id      uint64
	ch      *channel // nil once closed or disconnected
	queue   []*message
	head    uint64 // sequence number of queue[0]: messages consumed so far
	sent    int    // queue[:sent] were answered by WaitBatch, not yet acknowledged
	bytes   int
	state   string // "" active, OutcomeClosed, OutcomeDisconnected
	reason  string
	changed chan struct{}
	pending int
	lease   time.Time
}

// NewManager makes a Manager, records its boot id under DataDir (fsync), and starts the
// lease collector. Close stops it.
func NewManager(o Options) (*Manager, error) {
	if o.Limits.MaxChannels == 0 && o.Limits.MaxSubscribers == 0 && o.Limits.MaxMessageBytes == 0 && o.Limits.MaxBacklogBytes == 0 {
		o.Limits = DefaultLimits()
	}
	if err := o.Limits.Validate(); err != nil {
		return nil, err
	}
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxObjects <= 0 {
		o.MaxObjects = DefaultMaxObjects
	}
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	m := &Manager{
		limits: o.Limits, lease: o.Lease, bootID: hex.EncodeToString(b[:]), metrics: o.Metrics, now: o.Now, maxObjects: o.MaxObjects,
		objects: map[Key]*registry{}, tokens: map[string]Key{}, pastBoots: map[string]bool{},
		shutdown: make(chan struct{}), stopJan: make(chan struct{}), janDone: make(chan struct{}),
	}
	if o.DataDir != "" {
		if err := m.recordBoot(filepath.Join(o.DataDir, "channels")); err != nil {
			return nil, err
		}
	}
	if _, err := rand.Read(m.tokenKey[:]); err != nil {
		return nil, err
	}
	go m.janitor()
	return m, nil
}

// maxBootsKept bounds the boots file.
const maxBootsKept = 1000

func (m *Manager) recordBoot(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("channels: data dir: %w", err)
	}
	path := filepath.Join(dir, "boots")
	var past []string
	if f, err := os.Open(path); err == nil {
		s := bufio.NewScanner(f)
		for s.Scan() {
			if line := strings.TrimSpace(s.Text()); line != "" {
				past = append(past, line)
			}
		}
		f.Close()
	} else if !os.IsNotExist(err) {
		return fmt.Errorf("channels: read %s: %w", path, err)
	}
	if len(past) > maxBootsKept-1 {
		past = past[len(past)-(maxBootsKept-1):]
	}
	for _, p := range past {
		m.pastBoots[p] = true
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("channels: write %s: %w", tmp, err)
	}
	_, err = f.WriteString(strings.Join(append(past, m.bootID), "\n") + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return fmt.Errorf("channels: write %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// BootID is this run's id, carried in every handle.
func (m *Manager) BootID() string { return m.bootID }

// PendingWaits is the number of waits in progress (all objects).
func (m *Manager) PendingWaits() int { return int(m.waiting.Load()) }

// Lease is the subscription lease length.
func (m *Manager) Lease() time.Duration { return m.lease }

// Limits are the enforced limits.
func (m *Manager) Limits() Limits { return m.limits }

// Close answers every pending wait with REGISTRY_RESTARTED, refuses new calls the same
// way, and stops the collector. It is idempotent.
func (m *Manager) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	close(m.shutdown)
	m.mu.Unlock()
	close(m.stopJan)
	<-m.janDone
}

// stopping reports whether Close was called.
func (m *Manager) stopping() bool {
	select {
	case <-m.shutdown:
		return true
	default:
		return false
	}
}

func (m *Manager) restarted() *Error {
	return newError(http.StatusServiceUnavailable, CodeRegistryRestarted,
		"channel registry restarted: the sidecar is shutting down and its subscriptions are gone; subscribe again")
}

func (m *Manager) registry(k Key, create bool) (*registry, *Error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, m.restarted()
	}
	return m.openLocked(k, create)
}

func (m *Manager) validateName(name string) *Error {
	if name == "" || len(name) > m.limits.MaxChannelNameBytes || !utf8.ValidString(name) {
		e := newError(http.StatusBadRequest, CodeInvalidChannelName,
			"channel name must be 1..%d bytes of UTF-8 text, got %d bytes", m.limits.MaxChannelNameBytes, len(name))
		e.Limit = int64(m.limits.MaxChannelNameBytes)
		e.Source = "project decision (docs/channels.md)"
		return e
	}
	return nil
}

// Subscribe opens (or joins) channel name of object k and returns a handle
// "<instanceToken>:<bootId>-<readerId>". Errors: INVALID_CHANNEL_NAME, CHANNEL_LIMIT
// (opening channel MaxChannels+1), SUBSCRIBER_LIMIT (subscriber MaxSubscribers+1),
// REGISTRY_RESTARTED.
func (m *Manager) Subscribe(k Key, name string) (string, error) {
	if err := m.validateName(name); err != nil {
		return "", err
	}
	var r *registry
	for r == nil || r.freed {
		if r != nil {
			r.mu.Unlock() // freed between the lookup and the lock: look it up again
		}
		var err *Error
		if r, err = m.registry(k, true); err != nil {
			return "", err
		}
		r.mu.Lock()
	}
	defer r.mu.Unlock()
	m.collectLocked(r, m.now())
	c := r.channels[name]
	if c == nil {
		if len(r.channels) >= m.limits.MaxChannels {
			return "", limitError(CodeChannelLimit, int64(m.limits.MaxChannels), m.limits.source(limits.ChannelsPerObject),
				"object %s already has %d open channels (limit maxChannels = %d); channel %q was not opened — close or unsubscribe from a channel first",
				k, len(r.channels), m.limits.MaxChannels, name)
		}
		c = &channel{name: name}
		r.channels[name] = c
		m.metrics.channels(1)
	} else if len(c.readers) >= m.limits.MaxSubscribers {
		return "", limitError(CodeSubscriberLimit, int64(m.limits.MaxSubscribers), m.limits.source(limits.SubscribersPerChannel),
			"channel %q already has %d subscribers (limit maxSubscribers = %d)", name, len(c.readers), m.limits.MaxSubscribers)
	}
	m.mu.Lock()
	m.nextID++
	id := m.nextID
	m.mu.Unlock()
	rd := &reader{id: id, ch: c, changed: make(chan struct{}), lease: m.now().Add(m.lease)}
	c.readers = append(c.readers, rd)
	r.readers[id] = rd
	m.metrics.subscribers(1)
	return r.token + ":" + m.bootID + "-" + strconv.FormatUint(id, 10), nil
}

// Publish appends text to every subscriber of channel name, in one total order per
// channel, and returns how many subscribers it reached. A channel without subscribers
// reaches 0 (it is not opened). A subscriber whose backlog would exceed MaxBacklogBytes is
// disconnected (BacklogReason) and not counted. Errors: INVALID_CHANNEL_NAME,
// INVALID_MESSAGE (not UTF-8), MESSAGE_TOO_LARGE, REGISTRY_RESTARTED.
func (m *Manager) Publish(k Key, name, text string) (int, error) {
	if err := m.validateName(name); err != nil {
		return 0, err
	}
	if len(text) > m.limits.MaxMessageBytes {
		return 0, limitError(CodeMessageTooLarge, int64(m.limits.MaxMessageBytes), m.limits.source(limits.ChannelMessageBytes),
			"message is %d bytes of UTF-8, over the limit maxMessageBytes = %d (64 KiB by default)", len(text), m.limits.MaxMessageBytes)
	}
	if !utf8.ValidString(text) {
		return 0, newError(http.StatusBadRequest, CodeInvalidMessage, "message is not valid UTF-8 text")
	}
	r, err := m.registry(k, false)
	if err != nil || r == nil {
		if err != nil {
			return 0, err
		}
		m.metrics.published(0)
		return 0, nil
	}
	msg := newMessage(text) // encoded once, outside the lock, shared by every queue
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.channels[name]
	if c == nil {
		m.metrics.published(0)
		return 0, nil
	}
	reached := 0
	kept := c.readers[:0]
	var dropped []*reader
	for _, rd := range c.readers {
		if rd.bytes+len(text) > m.limits.MaxBacklogBytes {
			dropped = append(dropped, rd)
			continue
		}
		rd.queue = append(rd.queue, msg)
		rd.bytes += len(text)
		m.metrics.backlog(len(text))
		reached++
		rd.notify()
		kept = append(kept, rd)
	}
	c.readers = kept
	for _, rd := range dropped {
		rd.end(m, OutcomeDisconnected, BacklogReason(m.limits.MaxBacklogBytes), true)
		m.metrics.disconnect()
	}
	if len(c.readers) == 0 {
		delete(r.channels, name)
		m.metrics.channels(-1)
	}
	m.metrics.published(reached)
	return reached, nil
}

func (rd *reader) notify() {
	if rd.pending == 0 {
		return // nobody waits on changed: a wait reads the queue before it waits
	}
	close(rd.changed)
	rd.changed = make(chan struct{})
}

// end marks rd closed or disconnected (detached from its channel, which the caller
// updates); dropQueue discards its backlog.
func (rd *reader) end(m *Manager, state, reason string, dropQueue bool) {
	if rd.ch != nil {
		m.metrics.subscribers(-1)
	}
	rd.ch = nil
	rd.state, rd.reason = state, reason
	if dropQueue {
		m.metrics.backlog(-rd.bytes)
		rd.queue, rd.bytes, rd.sent = nil, 0, 0
	}
	rd.notify()
}

// CloseChannel closes channel name: each subscriber first receives what was queued for it, then
// Wait answers closed with reason. The name is free again at once. Returns the number of
// subscribers notified (0 when the channel was not open).
func (m *Manager) CloseChannel(k Key, name, reason string) (int, error) {
	if err := m.validateName(name); err != nil {
		return 0, err
	}
	if len(reason) > m.limits.MaxMessageBytes || !utf8.ValidString(reason) {
		return 0, newError(http.StatusBadRequest, CodeInvalidArgument,
			"close reason must be UTF-8 text of at most %d bytes (maxMessageBytes), got %d bytes", m.limits.MaxMessageBytes, len(reason))
	}
	r, err := m.registry(k, false)
	if err != nil || r == nil {
		if err != nil {
			return 0, err
		}
		return 0, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.channels[name]
	if c == nil {
		return 0, nil
	}
	for _, rd := range c.readers {
		rd.end(m, OutcomeClosed, reason, false)
	}
	delete(r.channels, name)
	m.metrics.channels(-1)
	return len(c.readers), nil
}

// SubscriberCount reads the registry: the live subscribers of channel name (0 when it is
// not open). No message is sent.
func (m *Manager) SubscriberCount(k Key, name string) (int, error) {
	if err := m.validateName(name); err != nil {
		return 0, err
	}
	r, err := m.registry(k, false)
	if err != nil || r == nil {
		if err != nil {
			return 0, err
		}
		return 0, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	m.collectLocked(r, m.now())
	if c := r.channels[name]; c != nil {
		return len(c.readers), nil
	}
	return 0, nil
}

// resolve finds the reader of handle in object k, with the errors of docs/channels.md.
func (m *Manager) resolve(k Key, handle string) (*registry, uint64, *Error) {
	unknown := func(why string) *Error {
		return newError(http.StatusNotFound, CodeUnknownHandle, "subscription handle %q was never issued by this channel registry (%s)", handle, why)
	}
	token, rest, ok := strings.Cut(handle, ":")
	if !ok {
		return nil, 0, unknown("malformed: want \"<instanceToken>:<readerId>\"")
	}
	boot, num, ok := strings.Cut(rest, "-")
	if !ok {
		return nil, 0, unknown("malformed reader id")
	}
	id, perr := strconv.ParseUint(num, 10, 64)
	m.mu.Lock()
	closed, past, owner, known, next := m.closed, m.pastBoots[boot], Key{}, false, m.nextID
	if k2, ok := m.tokens[token]; ok {
		owner, known = k2, true
	}
	r := m.objects[k]
	m.mu.Unlock()
	var own bool
	if r != nil {
		own = token == r.token // the keyed hash, computed once per registry
	} else {
		own = token == m.tokenFor(k)
	}
	switch {
	case closed:
		return nil, 0, m.restarted()
	case boot != m.bootID && past:
		return nil, 0, newError(http.StatusGone, CodeRegistryRestarted,
			"channel registry restarted: handle %q was issued by an earlier run of the sidecar (boot %s, now %s); its subscription is gone, subscribe again", handle, boot, m.bootID)
	case boot != m.bootID || perr != nil || id == 0 || id > next:
		return nil, 0, unknown("no such boot or reader id")
	case !own && known && owner != k:
		return nil, 0, newError(http.StatusForbidden, CodeForeignHandle,
			"subscription handle %q was issued to another Durable Object instance; handles are valid only in the object that subscribed", handle)
	case !own:
		return nil, 0, unknown("no such instance token")
	case r == nil:
		return nil, 0, m.gone(handle) // every subscription of the object ended: its registry was freed
	}
	return r, id, nil
}

// Wait returns the next message of handle's subscription, or a timeout after timeout
// (0 polls), or closed/disconnected with the reason once the queue is drained. A wait
// that times out or whose ctx ends consumes nothing. Errors: UNKNOWN_HANDLE,
// FOREIGN_HANDLE, SUBSCRIPTION_GONE, REGISTRY_RESTARTED, INVALID_ARGUMENT (timeout
// negative or over Limits.MaxWait); ctx.Err() when ctx ends.
func (m *Manager) Wait(ctx context.Context, k Key, handle string, timeout time.Duration) (Outcome, error) {
	return m.wait(ctx, k, handle, timeout, nil, func(rd *reader) Outcome {
		msg := rd.queue[0].text
		rd.consume(m, 1)
		return Outcome{Kind: OutcomeMessage, Message: msg}
	})
}

// MaxBatch bounds the messages one WaitBatch answer carries.
const MaxBatch = 1024

// WaitBatch is Wait answering up to max queued messages at once, without consuming them:
// they stay queued until a later wait acknowledges them, but leave the backlog (the
// subscriber has them).
// ack is the sequence number after the last message the caller consumed (the answer's Seq
// plus the number it used); messages before it leave the queue first. So a batch whose
// answer is lost is answered again, and a timed-out wait consumes nothing, as with Wait.
func (m *Manager) WaitBatch(ctx context.Context, k Key, handle string, timeout time.Duration, ack uint64, maxN int) (Outcome, error) {
	limit := min(max(maxN, 1), MaxBatch)
	acked := func(rd *reader) {
		if ack > rd.head {
			rd.consume(m, int(min(ack-rd.head, uint64(len(rd.queue)))))
		}
	}
	return m.wait(ctx, k, handle, timeout, acked, func(rd *reader) Outcome { return rd.batch(m, limit) })
}

// consume removes the first n queued messages of rd (acknowledged, or taken by Wait).
func (rd *reader) consume(m *Manager, n int) {
	rd.send(m, n)
	clear(rd.queue[:n])
	rd.queue = rd.queue[n:]
	rd.head += uint64(n)
	rd.sent -= n
}

// send marks the first n queued messages delivered: those not answered before leave the
// backlog (bytes counts what the subscriber has not been given).
func (rd *reader) send(m *Manager, n int) {
	for _, msg := range rd.queue[rd.sent:max(n, rd.sent)] {
		rd.bytes -= len(msg.text)
		m.metrics.backlog(-len(msg.text))
		m.metrics.delivered()
	}
	rd.sent = max(rd.sent, n)
}

// batch answers up to limit queued messages (at least one, at most MaxBacklogBytes of
// them after the first) without removing them.
func (rd *reader) batch(m *Manager, limit int) Outcome {
	n := rd.batchLen(m, limit)
	rd.send(m, n)
	texts := make([]string, n)
	for i, msg := range rd.queue[:n] {
		texts[i] = msg.text
	}
	return Outcome{Kind: OutcomeMessages, Messages: texts, Seq: rd.head}
}

// batchLen is how many queued messages one batch answers: at least one, up to limit, at
// most MaxBacklogBytes of them after the first.
func (rd *reader) batchLen(m *Manager, limit int) int {
	n, size := 1, len(rd.queue[0].text)
	for n < min(len(rd.queue), limit) && size+len(rd.queue[n].text) <= m.limits.MaxBacklogBytes {
		size += len(rd.queue[n].text)
		n++
	}
	return n
}

// wait is the long-poll of Wait and WaitBatch: first (when set) runs once under the
// registry lock before anything else, take answers from a non-empty queue.
func (m *Manager) wait(ctx context.Context, k Key, handle string, timeout time.Duration, first func(*reader), take func(*reader) Outcome) (Outcome, error) {
	if timeout < 0 || timeout > m.limits.MaxWait {
		e := newError(http.StatusBadRequest, CodeInvalidArgument, "timeoutMs must be 0..%d (maxWait), got %d", m.limits.MaxWait.Milliseconds(), timeout.Milliseconds())
		e.Limit, e.Source = m.limits.MaxWait.Milliseconds(), maxWaitSource
		return Outcome{}, e
	}
	r, id, err := m.resolve(k, handle)
	if err != nil {
		return Outcome{}, err
	}
	r.mu.Lock()
	rd := r.readers[id]
	if rd == nil {
		r.mu.Unlock()
		return Outcome{}, m.gone(handle)
	}
	if first != nil {
		first(rd)
	}
	rd.pending++
	m.waiting.Add(1)
	m.metrics.waiting(1)
	defer func() {
		m.waiting.Add(-1)
		m.metrics.waiting(-1)
		r.mu.Lock()
		rd.pending--
		rd.lease = m.now().Add(m.lease)
		r.mu.Unlock()
	}()
	var timer <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		timer = t.C
	}
	for {
		if r.readers[id] != rd {
			r.mu.Unlock()
			return Outcome{}, m.gone(handle)
		}
		if len(rd.queue) > 0 {
			o := take(rd)
			r.mu.Unlock()
			return o, nil
		}
		if rd.state != "" {
			o := Outcome{Kind: rd.state, Reason: rd.reason}
			r.mu.Unlock()
			return o, nil
		}
		if timer == nil {
			r.mu.Unlock()
			return Outcome{Kind: OutcomeTimeout}, nil
		}
		changed := rd.changed
		r.mu.Unlock()
		select {
		case <-changed:
		case <-timer:
			return Outcome{Kind: OutcomeTimeout}, nil
		case <-ctx.Done():
			return Outcome{}, ctx.Err()
		case <-m.shutdown:
			return Outcome{}, m.restarted()
		}
		r.mu.Lock()
	}
}

func (m *Manager) gone(handle string) *Error {
	return newError(http.StatusGone, CodeSubscriptionGone,
		"subscription %q is gone: it was unsubscribed, or collected because no wait renewed its lease for %s", handle, m.lease)
}

// Unsubscribe ends handle's subscription (the subscriber count drops at once). It reports
// false when the subscription was already gone. Errors: UNKNOWN_HANDLE, FOREIGN_HANDLE,
// REGISTRY_RESTARTED.
func (m *Manager) Unsubscribe(k Key, handle string) (bool, error) {
	r, id, err := m.resolve(k, handle)
	if err != nil {
		return false, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	rd := r.readers[id]
	if rd == nil {
		return false, nil
	}
	m.removeLocked(r, rd)
	m.freeIfIdleLocked(r)
	return true, nil
}

func (m *Manager) removeLocked(r *registry, rd *reader) {
	if c := rd.ch; c != nil {
		for i, x := range c.readers {
			if x == rd {
				c.readers = append(c.readers[:i], c.readers[i+1:]...)
				break
			}
		}
		if len(c.readers) == 0 {
			delete(r.channels, c.name)
			m.metrics.channels(-1)
		}
		m.metrics.subscribers(-1)
		rd.ch = nil
	}
	m.metrics.backlog(-rd.bytes)
	rd.queue, rd.bytes, rd.sent = nil, 0, 0
	delete(r.readers, rd.id)
	rd.notify()
}

// collectLocked removes subscriptions whose lease lapsed with no wait pending.
func (m *Manager) collectLocked(r *registry, now time.Time) {
	for _, rd := range r.readers {
		if rd.pending == 0 && now.After(rd.lease) {
			m.removeLocked(r, rd)
			m.metrics.collected()
		}
	}
}

func (m *Manager) janitor() {
	defer close(m.janDone)
	t := time.NewTicker(m.lease / 2)
	defer t.Stop()
	for {
		select {
		case <-m.stopJan:
			return
		case <-t.C:
		}
		m.mu.Lock()
		regs := make([]*registry, 0, len(m.objects))
		for _, r := range m.objects {
			regs = append(regs, r)
		}
		m.mu.Unlock()
		now := m.now()
		for _, r := range regs {
			r.mu.Lock()
			m.collectLocked(r, now)
			m.freeIfIdleLocked(r)
			r.mu.Unlock()
		}
		m.mu.Lock()
		m.shrinkMaps()
		m.mu.Unlock()
	}
}
