package channels

import (
	"fmt"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/limits"
)

// ContractSource names the document the channel limits come from (for messages about
// ceilings): the durable channel contract 0.1.0.
const ContractSource = limits.DocChannels + " (durable channel contract 0.1.0)"

// maxWaitSource is the Source of an error about a wait timeout over Limits.MaxWait.
const maxWaitSource = "project decision, docs/channels.md: the longest wall time of a Workers invocation (15 min)"

// Limits are the per-object-instance channel limits. Defaults come from the limit profile
// (internal/limits: channels_per_object, subscribers_per_channel, channel_message_bytes,
// channel_backlog_bytes; docs/channels.md); a DurableObjectNamespace may lower them
// (spec.channels.max*, passed as sidecar flags), never raise them.
type Limits struct {
	// MaxChannels is the number of open channels per object instance (64).
	MaxChannels int
	// MaxSubscribers is the number of subscribers per channel (256).
	MaxSubscribers int
	// MaxMessageBytes is the size of one message in UTF-8 bytes (65536 = 64 KiB); empty
	// messages are allowed.
	MaxMessageBytes int
	// MaxBacklogBytes is the bytes queued for one subscriber (1048576 = 1 MiB); a publish
	// that would exceed it disconnects that subscriber only.
	MaxBacklogBytes int
	// MaxChannelNameBytes is the length of a channel name in UTF-8 bytes (256; a project
	// decision: the channel contract names no limit).
	MaxChannelNameBytes int
	// MaxWait is the longest wait timeout accepted (15 min, the longest wall time of a
	// Workers invocation, limit cron_wall_time_ms).
	MaxWait time.Duration
	// Profile is the limit profile the values (or their ceilings) come from.
	Profile limits.Profile
	// Source, when set, says the values were lowered (e.g. "sidecar --channel-max-* flags
	// (DurableObjectNamespace spec.channels)"); limit errors quote it besides the profile.
	Source string
}

// DefaultLimits returns the limits of the default profile (internal/limits).
func DefaultLimits() Limits { return LimitsFor(limits.DefaultProfile) }

// LimitsFor returns the channel limits of profile p (internal/limits). Panics on an unknown
// profile (validate it with limits.ParseProfile first).
func LimitsFor(p limits.Profile) Limits {
	return Limits{
		MaxChannels:         int(limits.Get(p, limits.ChannelsPerObject)),
		MaxSubscribers:      int(limits.Get(p, limits.SubscribersPerChannel)),
		MaxMessageBytes:     int(limits.Get(p, limits.ChannelMessageBytes)),
		MaxBacklogBytes:     int(limits.Get(p, limits.ChannelBacklogBytes)),
		MaxChannelNameBytes: 256,
		MaxWait:             15 * time.Minute,
		Profile:             p,
	}
}

// source is the text a limit error carries for limit n: the profile's citation
// (`profile "paid"; limit channels_per_object; source: 001_....txt`), plus Source when the
// value was lowered.
func (l Limits) source(n limits.Name) string {
	p := l.Profile
	if p == "" {
		p = limits.DefaultProfile
	}
	cite := string(n)
	if row, ok := limits.Lookup(n); ok {
		cite = row.Cite(p)
	}
	if l.Source != "" {
		return l.Source + "; ceiling: " + cite
	}
	return cite
}

// Validate reports a limit that is not positive or above its profile's ceiling.
func (l Limits) Validate() error {
	p := l.Profile
	if p == "" {
		p = limits.DefaultProfile
	}
	if _, err := limits.ParseProfile(string(p)); err != nil {
		return fmt.Errorf("channels: %w", err)
	}
	d := LimitsFor(p)
	check := func(name string, v, max int) error {
		if v < 1 || v > max {
			return fmt.Errorf("channels: limit %s = %d is outside 1..%d (ceiling from profile %q, %s)", name, v, max, p, ContractSource)
		}
		return nil
	}
	for _, c := range []struct {
		name   string
		v, max int
	}{
		{"maxChannels (spec.channels.maxChannels, --channel-max-channels)", l.MaxChannels, d.MaxChannels},
		{"maxSubscribers (spec.channels.maxSubscribers, --channel-max-subscribers)", l.MaxSubscribers, d.MaxSubscribers},
		{"maxMessageBytes (spec.channels.maxMessageBytes, --channel-max-message-bytes)", l.MaxMessageBytes, d.MaxMessageBytes},
		{"maxBacklogBytes (spec.channels.maxBacklogBytes, --channel-max-backlog-bytes)", l.MaxBacklogBytes, d.MaxBacklogBytes},
		{"maxChannelNameBytes", l.MaxChannelNameBytes, 1 << 16},
	} {
		if err := check(c.name, c.v, c.max); err != nil {
			return err
		}
	}
	if l.MaxBacklogBytes < 1024 {
		return fmt.Errorf("channels: limit maxBacklogBytes (spec.channels.maxBacklogBytes, --channel-max-backlog-bytes) = %d is below 1024 (the API's minimum)", l.MaxBacklogBytes)
	}
	if l.MaxWait <= 0 {
		return fmt.Errorf("channels: MaxWait = %s must be positive", l.MaxWait)
	}
	return nil
}

// BacklogReason is the disconnect reason for a subscriber over maxBacklog bytes: exactly
// "subscription backlog exceeded 1 MiB" for the default (docs/channels.md).
func BacklogReason(maxBacklog int) string {
	return "subscription backlog exceeded " + humanBytes(maxBacklog)
}

func humanBytes(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	default:
		return fmt.Sprintf("%d bytes", n)
	}
}
