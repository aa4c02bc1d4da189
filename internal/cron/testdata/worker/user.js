// The user's worker: records every scheduled() call (and when it started, for the
// lateness benchmark); "13 * * * *" calls noRetry() and
// throws; "17 * * * *" outlives any short wall-time limit.
const calls = [];

export default {
  async scheduled(controller) {
    calls.push({ cron: controller.cron, scheduledTime: controller.scheduledTime, at: Date.now() });
    if (controller.cron === "13 * * * *") {
      controller.noRetry();
      throw new Error("boom from the test worker");
    }
    if (controller.cron === "17 * * * *") {
      await new Promise((resolve) => setTimeout(resolve, 20000));
    }
  },
  async fetch() {
    return Response.json(calls);
  },
};
