package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/workerd-operator/workerd-operator/internal/limits"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/sidecar"
	"github.com/workerd-operator/workerd-operator/internal/sidecar/channels"
	"github.com/workerd-operator/workerd-operator/internal/workflows"
)

// newSidecarCommand: `workerd-operator sidecar --listen $(POD_IP):9092 --data-dir
// /var/lib/workerd-operator [--channel-* limits]`. SIGTERM/SIGINT shut it down gracefully
// (pending channel waits are answered REGISTRY_RESTARTED, then connections drain for up to
// --shutdown-timeout).
func newSidecarCommand() *cobra.Command {
	lim := channels.DefaultLimits()
	var (
		listen, dataDir string
		workflowsConfig string
		runnerURL       string
		profile         string
		lease, grace    time.Duration
	)
	cmd := &cobra.Command{
		Use:   "sidecar",
		Short: "Run the per-pod sidecar (durable channels, workflows, metrics) next to workerd",
		Long: "Serves HTTP on --listen ($(POD_IP):9092 in a pod; workerd reaches it as the external\n" +
			"service `sidecar`): GET /healthz, GET /metrics, the durable-channel API under /channels/\n" +
			"(docs/channels.md). Channel limits default to seed 001's and may only be lowered\n" +
			"(DurableObjectNamespace spec.channels).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if listen == "" {
				return fmt.Errorf("sidecar: --listen is required (e.g. $(POD_IP):%d, docs/pod-contract.md)", podcontract.SidecarPort)
			}
			p, err := limits.ParseProfile(profile)
			if err != nil {
				return fmt.Errorf("sidecar: --limits-profile: %w", err)
			}
			l := channels.LimitsFor(p)
			lowered := false
			for flag, dst := range map[string]struct{ from, to *int }{
				"channel-max-channels":      {&lim.MaxChannels, &l.MaxChannels},
				"channel-max-subscribers":   {&lim.MaxSubscribers, &l.MaxSubscribers},
				"channel-max-message-bytes": {&lim.MaxMessageBytes, &l.MaxMessageBytes},
				"channel-max-backlog-bytes": {&lim.MaxBacklogBytes, &l.MaxBacklogBytes},
			} {
				if cmd.Flags().Changed(flag) {
					*dst.to, lowered = *dst.from, true
				}
			}
			if lowered {
				l.Source = "sidecar --channel-max-* flags (DurableObjectNamespace spec.channels)"
			}
			srv, err := sidecar.New(sidecar.Options{Addr: listen, DataDir: dataDir, ChannelLimits: l, ChannelLease: lease})
			if err != nil {
				return err
			}
			if workflowsConfig != "" {
				// A workflow engine pod: the engine's state lives under the data dir.
				wo, err := workflows.LoadOptionsFile(workflowsConfig, runnerURL)
				if err != nil {
					return err
				}
				wo.Logf = func(format string, a ...any) { fmt.Fprintf(cmd.ErrOrStderr(), "workflows: "+format+"\n", a...) }
				if _, err := workflows.Attach(srv, wo); err != nil {
					return err
				}
			}
			if err := srv.Listen(); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "sidecar: listening on %s, data dir %s, channel registry boot %s\n", srv.Addr(), srv.DataDir(), srv.Channels().BootID())
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			errc := make(chan error, 1)
			go func() { errc <- srv.Serve() }()
			select {
			case err := <-errc:
				return err
			case <-ctx.Done():
			}
			fmt.Fprintln(cmd.ErrOrStderr(), "sidecar: shutting down")
			sctx, cancel := context.WithTimeout(context.Background(), grace)
			defer cancel()
			if err := srv.Shutdown(sctx); err != nil {
				return fmt.Errorf("sidecar: shutdown: %w", err)
			}
			return <-errc
		},
	}
	f := cmd.Flags()
	f.StringVar(&workflowsConfig, "workflows-config", "", "run the Workflows engine with this config file (internal/sidecar/workflows FileConfig); engine pods only")
	f.StringVar(&runnerURL, "workflows-runner-url", "", "the workerd `workflows` socket the engine runs instances through (http://$(POD_IP):9094); overrides the config file's runnerURL")
	f.StringVar(&listen, "listen", "", "listen address host:port ($(POD_IP):9092 in a pod)")
	f.StringVar(&dataDir, "data-dir", podcontract.SidecarDataDir, "state directory (the shard's PVC or an emptyDir)")
	f.StringVar(&profile, "limits-profile", string(limits.DefaultProfile), "limit profile the channel limits come from (free, paid, custom; internal/limits)")
	f.DurationVar(&lease, "channel-lease", channels.DefaultLease, "durable-channel subscription lease, renewed by subscribe and every wait; lapsed subscriptions are collected")
	f.DurationVar(&grace, "shutdown-timeout", 10*time.Second, "how long SIGTERM waits for open requests")
	f.IntVar(&lim.MaxChannels, "channel-max-channels", lim.MaxChannels, "channels per Durable Object instance (lower than the profile's channels_per_object, 64)")
	f.IntVar(&lim.MaxSubscribers, "channel-max-subscribers", lim.MaxSubscribers, "subscribers per channel (lower than the profile's subscribers_per_channel, 256)")
	f.IntVar(&lim.MaxMessageBytes, "channel-max-message-bytes", lim.MaxMessageBytes, "bytes per message (lower than the profile's channel_message_bytes, 65536)")
	f.IntVar(&lim.MaxBacklogBytes, "channel-max-backlog-bytes", lim.MaxBacklogBytes, "bytes queued per subscriber before it is disconnected (1024 up to the profile's channel_backlog_bytes, 1048576)")
	return cmd
}
