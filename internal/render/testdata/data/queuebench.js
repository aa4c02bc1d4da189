// BenchmarkQueueDelivery (datastores_bench_test.go): the producer sends, the consumer
// acks every batch and counts the messages it acked in this process.
let acked = 0;

export default {
  async fetch(request, env) {
    const u = new URL(request.url);
    switch (u.pathname) {
      case "/send": {
        // n messages, one send() each or sendBatch() of 100.
        const n = Number(u.searchParams.get("n")), batch = u.searchParams.get("batch") === "1";
        for (let i = 0; i < n; i += batch ? 100 : 1) {
          if (batch) await env.Q.sendBatch(Array.from({ length: Math.min(100, n - i) }, () => ({ body: { i } })));
          else await env.Q.send({ i });
        }
        return new Response("ok");
      }
      case "/acked":
        return new Response(String(acked));
    }
    return new Response("no such path", { status: 404 });
  },
  async queue(batch) {
    batch.ackAll();
    acked += batch.messages.length;
  },
};
