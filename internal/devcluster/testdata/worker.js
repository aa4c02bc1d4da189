// Answers every request with the body in body.txt (read by the test too) and logs one
// line per request.
import body from "./body.txt";

export default {
  async fetch(request) {
    console.log(`devcluster-test ${request.method} ${new URL(request.url).pathname}`);
    return new Response(body);
  },
};
