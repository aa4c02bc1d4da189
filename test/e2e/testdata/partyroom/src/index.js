// A partyserver room with hibernation: "echo:<x>" answers the sender with <x>; any other
// message goes to every connection of the room as "<connection id>: <message>".
import { Server, routePartykitRequest } from "partyserver";

export class Chat extends Server {
  static options = { hibernate: true };

  onConnect(conn) {
    conn.send(`welcome to ${this.name}`);
  }

  onMessage(conn, message) {
    if (typeof message === "string" && message.startsWith("echo:")) {
      conn.send(message.slice(5));
      return;
    }
    this.broadcast(`${conn.id}: ${message}`);
  }
}

export default {
  async fetch(request, env) {
    return (await routePartykitRequest(request, env)) ?? new Response("not found\n", { status: 404 });
  },
};
