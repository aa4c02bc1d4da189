package channels

import (
	"fmt"
	"time"
)

// SeedSource is the source of the default channel limits.
const SeedSource = "seed 001 (Durable Channel contract 0.1.0), DESIGN.md §6"

// Limits are the per-object-instance channel limits. Defaults (DefaultLimits) are the
// seed's; a DurableObjectNamespace may lower them (spec.channels.max*), never raise them.
//
// TODO(limits): read these from internal/limits (profile table) once it carries the channel
// limits; until then DefaultLimits holds the seed values and the sidecar flags override them.
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
	// decision: the seed names no limit).
	MaxChannelNameBytes int
	// MaxWait is the longest wait timeout accepted (15 min, the seed's longest request
	// wall time with an execution config).
	MaxWait time.Duration
	// Source names where the values come from, quoted in limit errors.
	Source string
}

// DefaultLimits returns the seed's limits.
func DefaultLimits() Limits {
	return Limits{
		MaxChannels:         64,
		MaxSubscribers:      256,
		MaxMessageBytes:     64 << 10,
		MaxBacklogBytes:     1 << 20,
		MaxChannelNameBytes: 256,
		MaxWait:             15 * time.Minute,
		Source:              SeedSource,
	}
}

// Validate reports a limit that is not positive or above the seed's ceiling.
func (l Limits) Validate() error {
	d := DefaultLimits()
	check := func(name string, v, max int) error {
		if v < 1 || v > max {
			return fmt.Errorf("channels: limit %s = %d is outside 1..%d (ceiling from %s)", name, v, max, SeedSource)
		}
		return nil
	}
	for _, c := range []struct {
		name   string
		v, max int
	}{
		{"maxChannels", l.MaxChannels, d.MaxChannels},
		{"maxSubscribers", l.MaxSubscribers, d.MaxSubscribers},
		{"maxMessageBytes", l.MaxMessageBytes, d.MaxMessageBytes},
		{"maxBacklogBytes", l.MaxBacklogBytes, d.MaxBacklogBytes},
		{"maxChannelNameBytes", l.MaxChannelNameBytes, 1 << 16},
	} {
		if err := check(c.name, c.v, c.max); err != nil {
			return err
		}
	}
	if l.MaxBacklogBytes < 1024 {
		return fmt.Errorf("channels: limit maxBacklogBytes = %d is below 1024 (DurableObjectNamespace spec.channels.maxBacklogBytes minimum)", l.MaxBacklogBytes)
	}
	if l.MaxWait <= 0 {
		return fmt.Errorf("channels: MaxWait = %s must be positive", l.MaxWait)
	}
	return nil
}

// BacklogReason is the disconnect reason for a subscriber over maxBacklog bytes: exactly
// "subscription backlog exceeded 1 MiB" for the default (DESIGN.md §6).
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
