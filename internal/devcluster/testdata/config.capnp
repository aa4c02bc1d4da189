# A hand-written workerd config for the devcluster tests: one worker on socket "http",
# whose address comes from --socket-addr (the pod contract: bind to $(POD_IP)).
using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [ (name = "main", worker = .mainWorker) ],
  sockets = [ (name = "http", address = "*:8080", http = (), service = "main") ],
);

const mainWorker :Workerd.Worker = (
  modules = [
    (name = "worker.js", esModule = embed "worker.js"),
    (name = "body.txt", text = embed "body.txt"),
  ],
  compatibilityDate = "2024-09-23",
);
