package wrangler

// Keys of a wrangler configuration that the importer does not turn into a field,
// with the reason. Keys handled in convert.go (name, main, compatibility_date,
// compatibility_flags, vars, durable_objects, migrations, workflows, services,
// triggers, limits, secrets, env, assets) are not listed here.

// ignoredKeys configure Cloudflare's deployment or dashboard, not what the Worker
// does: they are reported as notes, not as unsupported.
var ignoredKeys = map[string]string{
	"$schema":            "editor schema reference",
	"account_id":         "Cloudflare account; the cluster is the account here",
	"workers_dev":        "workers.dev route; the Worker is reached through its Service",
	"preview_urls":       "Cloudflare preview URLs",
	"send_metrics":       "wrangler's own usage metrics",
	"upload_source_maps": "source maps uploaded to Cloudflare for its dashboard",
	"observability":      "Workers Logs in Cloudflare's dashboard; workerd's console output is the workerd container's log",
	"logpush":            "Cloudflare Logpush; workerd's console output is the workerd container's log",
	"keep_vars":          "dashboard-edited vars; the Worker object holds every var",
	"dev":                "`wrangler dev` settings",
	"usage_model":        "deprecated billing model",
	"placement":          "Smart Placement picks a Cloudflare location; Kubernetes schedules the pods",
}

// bundlerKeys are applied by wrangler when it bundles: with --bundle they are already
// in the modules; without it (main read as is) they would be lost, so they count as
// unsupported.
var bundlerKeys = map[string]bool{
	"build": true, "rules": true, "no_bundle": true, "find_additional_modules": true,
	"base_dir": true, "preserve_file_names": true, "tsconfig": true, "minify": true,
	"define": true, "alias": true, "jsx_factory": true, "jsx_fragment": true, "node_compat": true,
}

const bundlerReason = "applied by wrangler when it bundles; bundle with `wrangler deploy --dry-run --outdir DIR` and pass --bundle DIR"

// unsupportedKeys are known wrangler keys the API has no field for yet.
var unsupportedKeys = map[string]string{
	"vectorize":                 "no Vectorize binding kind",
	"analytics_engine_datasets": "no Analytics Engine binding kind",
	"browser":                   "no Browser Rendering binding kind",
	"images":                    "no Images binding kind",
	"send_email":                "no Email binding kind",
	"mtls_certificates":         "no mTLS certificate binding kind",
	"version_metadata":          "no version metadata binding kind",
	"pipelines":                 "no Pipelines binding kind",
	"secrets_store_secrets":     "no Secrets Store binding kind; use secrets (a Kubernetes Secret)",
	"unsafe":                    "unsafe bindings are Cloudflare-internal",
	"wasm_modules":              "service-worker format globals are not supported; use ES module imports",
	"text_blobs":                "service-worker format globals are not supported; use ES module imports",
	"data_blobs":                "service-worker format globals are not supported; use ES module imports",
	"routes":                    "routes on Cloudflare zones; the Worker is reached through its Service (add an Ingress or Gateway route)",
	"route":                     "routes on Cloudflare zones; the Worker is reached through its Service (add an Ingress or Gateway route)",
	"legacy_env":                "legacy environments are not supported",
}

// unknownReason is the reason given for a key the importer does not know at all.
const unknownReason = "not a key the importer knows"
