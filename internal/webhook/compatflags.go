package webhook

// ExperimentalFlagsSource is where the list of experimental compatibility flags comes
// from: the fields annotated $experimental in workerd's compatibility-date.capnp.
const ExperimentalFlagsSource = "https://github.com/cloudflare/workerd/blob/00c25c5a0aebc4b56897c8c093e04765e4e90278/src/workerd/io/compatibility-date.capnp"

// experimentalFlags are the enable-flag names of the $experimental fields of workerd's
// compatibility-date.capnp (ExperimentalFlagsSource). workerd refuses them unless run
// with --experimental, and Cloudflare refuses them outside its own test accounts; the
// operator admits them only under the custom profile.
var experimentalFlags = map[string]bool{
	"durable_object_rename":                  true,
	"experimental":                           true,
	"durable_object_get_existing":            true,
	"service_binding_extra_handlers":         true,
	"rtti_api":                               true,
	"webgpu":                                 true,
	"unsafe_module":                          true,
	"js_rpc":                                 true,
	"new_module_registry":                    true,
	"kv_direct_binding":                      true,
	"increase_websocket_message_size":        true,
	"python_workers_development":             true,
	"replica_routing":                        true,
	"enable_d1_with_sessions_api":            true,
	"tail_worker_user_spans":                 true,
	"memory_cache_delete":                    true,
	"python_workers_durable_objects":         true,
	"streaming_tail_worker":                  true,
	"enable_web_file_system":                 true,
	"enable_abortsignal_rpc":                 true,
	"connect_pass_through":                   true,
	"unsupported_process_actual_platform":    true,
	"python_dedicated_snapshot":              true,
	"typescript_strip_types":                 true,
	"allow_insecure_inefficient_logged_eval": true,
	"enhanced_error_serialization":           true,
	"enable_email_sending_queuing":           true,
	"enable_nodejs_perf_hooks_module":        true,
	"enable_nodejs_domain_module":            true,
	"enable_nodejs_v8_module":                true,
	"enable_nodejs_tty_module":               true,
	"enable_nodejs_punycode_module":          true,
	"enable_nodejs_cluster_module":           true,
	"enable_nodejs_child_process_module":     true,
	"enable_nodejs_worker_threads_module":    true,
	"enable_nodejs_stream_wrap_module":       true,
	"enable_nodejs_wasi_module":              true,
	"enable_nodejs_dgram_module":             true,
	"enable_nodejs_inspector_module":         true,
	"enable_nodejs_trace_events_module":      true,
	"enable_workerd_debug_module":            true,
}

// IsExperimentalFlag reports whether compatibility flag f is experimental in workerd.
func IsExperimentalFlag(f string) bool { return experimentalFlags[f] }
