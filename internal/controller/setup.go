package controller

import (
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/workerd-operator/workerd-operator/internal/controller/common"
	"github.com/workerd-operator/workerd-operator/internal/controller/cronschedule"
	"github.com/workerd-operator/workerd-operator/internal/controller/datastore"
	"github.com/workerd-operator/workerd-operator/internal/controller/durableobjectnamespace"
	"github.com/workerd-operator/workerd-operator/internal/controller/r2bucket"
	"github.com/workerd-operator/workerd-operator/internal/controller/worker"
	"github.com/workerd-operator/workerd-operator/internal/controller/workflow"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/specs"
)

// SetupAll registers everything the operator reconciles with mgr: the field indexes,
// the reconcilers of Workers, DurableObjectNamespaces and Workflows, and the
// CronSchedule dispatcher (leader only). cron's APIReader, Recorder, Log and Workflows
// default to the manager's reader, an event recorder, a named logger and the engine
// starter.
func SetupAll(mgr ctrl.Manager, opts specs.Options, cron cronschedule.DispatcherOptions) error {
	if err := common.SetupIndexes(mgr); err != nil {
		return err
	}
	events := common.Events{Recorder: mgr.GetEventRecorder(common.EventRecorderName)}
	if err := (&worker.Reconciler{Client: mgr.GetClient(), Options: opts, Events: events}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&durableobjectnamespace.Reconciler{Client: mgr.GetClient(), Options: opts, Events: events}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&workflow.Reconciler{Client: mgr.GetClient(), Options: opts, Events: events}).SetupWithManager(mgr); err != nil {
		return err
	}
	for _, kind := range []render.DataKind{render.DataKV, render.DataD1, render.DataQueue} {
		if err := (&datastore.Reconciler{Client: mgr.GetClient(), Options: opts, Events: events, Kind: kind}).SetupWithManager(mgr); err != nil {
			return err
		}
	}
	if err := (&r2bucket.Reconciler{Client: mgr.GetClient(), Events: events}).SetupWithManager(mgr); err != nil {
		return err
	}
	if cron.APIReader == nil {
		cron.APIReader = mgr.GetAPIReader()
	}
	if cron.Recorder == nil {
		cron.Recorder = mgr.GetEventRecorder("cron-dispatcher")
	}
	if cron.Log.GetSink() == nil {
		cron.Log = ctrl.Log.WithName("cron-dispatcher")
	}
	if cron.Workflows == nil {
		cron.Workflows = &cronschedule.EngineStarter{Client: mgr.GetClient(), Issuer: opts.Issuer}
	}
	if cron.Issuer == nil {
		cron.Issuer = opts.Issuer
	}
	return mgr.Add(cronschedule.NewDispatcher(mgr.GetClient(), cron))
}

// CacheOptions are the manager's cache options. With namespaces (manager flag
// --watch-namespaces) the cache lists and watches objects of those namespaces and of
// managerNamespace (where the manager keeps its own records) only, so that Roles there
// suffice; Namespaces, which are cluster-scoped, are still read cluster-wide. Without:
// every namespace.
func CacheOptions(namespaces []string, managerNamespace string) cache.Options {
	if len(namespaces) == 0 {
		return cache.Options{}
	}
	set := map[string]cache.Config{}
	for _, ns := range append(namespaces, managerNamespace) {
		if ns != "" {
			set[ns] = cache.Config{}
		}
	}
	return cache.Options{DefaultNamespaces: set}
}
