// The user's worker: records every scheduled() call (and when it started, for the
// lateness benchmark); "13 * * * *" calls noRetry() and
// throws, "45 * * * *" throws; "17 * * * *" and "46 * * * *" outlive any short
// wall-time limit.
const calls = [];

export default {
  async scheduled(controller) {
    calls.push({ cron: controller.cron, scheduledTime: controller.scheduledTime, at: Date.now() });
    if (controller.cron === "13 * * * *") {
      controller.noRetry();
      throw new Error("boom from the test worker");
    }
    if (controller.cron === "45 * * * *") {
      throw new Error("boom in a batch");
    }
    if (controller.cron === "17 * * * *" || controller.cron === "46 * * * *") {
      await new Promise((resolve) => setTimeout(resolve, 20000));
    }
  },
  async fetch() {
    return Response.json(calls);
  },
};
