package specs

import (
	"reflect"
	"testing"

	"k8s.io/utils/ptr"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
)

// spec.channels.max* become the shard sidecar's --channel-max-* flags (docs/channels.md
// "Limits"); flag names are the ones cmd/workerd-operator/sidecar.go defines.
func TestChannelLimitArgs(t *testing.T) {
	cases := []struct {
		name string
		in   *fleetv1alpha1.ChannelsSpec
		want []string
	}{
		{"no channels", nil, nil},
		{"disabled with limits", &fleetv1alpha1.ChannelsSpec{MaxChannels: ptr.To[int32](8)}, nil},
		{"enabled, profile limits", &fleetv1alpha1.ChannelsSpec{Enabled: true}, nil},
		{"enabled, all lowered", &fleetv1alpha1.ChannelsSpec{Enabled: true, MaxChannels: ptr.To[int32](8), MaxSubscribers: ptr.To[int32](16),
			MaxMessageBytes: ptr.To[int32](1024), MaxBacklogBytes: ptr.To[int32](4096)},
			[]string{"--channel-max-channels=8", "--channel-max-subscribers=16", "--channel-max-message-bytes=1024", "--channel-max-backlog-bytes=4096"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := channelLimitArgs(tc.in); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("channelLimitArgs = %q, want %q", got, tc.want)
			}
		})
	}
}
