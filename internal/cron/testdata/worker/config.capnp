# A trigger-like test fleet for the dispatcher tests: the "trigger" socket serves
# trigger.js (the protocol of docs/pod-contract.md), which calls the user worker's
# scheduled() through a service binding; user.js records every call.
using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "trigger", worker = .trigger),
    (name = "user", worker = .user),
  ],
  sockets = [(name = "trigger", address = "127.0.0.1:9091", http = (), service = "trigger")],
);

const trigger :Workerd.Worker = (
  modules = [(name = "trigger.js", esModule = embed "trigger.js")],
  compatibilityDate = "2025-01-01",
  compatibilityFlags = ["service_binding_extra_handlers"],
  bindings = [(name = "TARGET", service = "user")],
);

const user :Workerd.Worker = (
  modules = [(name = "user.js", esModule = embed "user.js")],
  compatibilityDate = "2025-01-01",
);
