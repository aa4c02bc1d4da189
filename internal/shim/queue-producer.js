// env.<QUEUE> of a producer binding with a deliveryDelay (wrangler's
// queues.producers[].delivery_delay): workerd's own Queue binding (inner binding
// `queue`) whose messages wait `deliveryDelay` seconds unless the send, the batch or the
// message sets delaySeconds, which wins as on Cloudflare
// (https://developers.cloudflare.com/queues/configuration/configure-queues/). A message's
// own delaySeconds in sendBatch overrides the batch's (workerd's queues.js takes it first).
class QueueProducer {
  #queue;
  #delay;
  constructor(queue, delay) {
    this.#queue = queue;
    this.#delay = delay;
  }
  send(body, options) {
    return this.#queue.send(body, { ...options, delaySeconds: options?.delaySeconds ?? this.#delay });
  }
  sendBatch(messages, options) {
    return this.#queue.sendBatch(messages, { ...options, delaySeconds: options?.delaySeconds ?? this.#delay });
  }
  metrics() {
    return this.#queue.metrics();
  }
}

export default function makeBinding(env) {
  return new QueueProducer(env.queue, env.deliveryDelay);
}
