# The dispatcher tests' pod: the "trigger" socket serves the operator's own trigger
# shim (internal/shim/trigger.js, docs/pod-contract.md), which calls the user worker's
# scheduled() through a service binding; user.js records every call and answers them
# on the "user" socket.
using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "trigger", worker = .trigger),
    (name = "user", worker = .user),
  ],
  sockets = [
    (name = "trigger", address = "127.0.0.1:9091", http = (), service = "trigger"),
    (name = "user", address = "127.0.0.1:9093", http = (), service = "user"),
  ],
);

const trigger :Workerd.Worker = (
  modules = [(name = "trigger.js", esModule = embed "../../../../internal/shim/trigger.js")],
  compatibilityDate = "2025-01-01",
  compatibilityFlags = ["service_binding_extra_handlers"],
  bindings = [(name = "TARGET", service = "user")],
);

const user :Workerd.Worker = (
  modules = [(name = "user.js", esModule = embed "user.js")],
  compatibilityDate = "2025-01-01",
);
