// A small GraphQL client for the inspector: queries and mutations over HTTP,
// subscriptions over one websocket speaking graphql-transport-ws.
//
// The token (if any) goes in `Authorization: Bearer <token>` on HTTP and in
// the `connection_init` payload as `{authorization: "Bearer <token>"}`.

const PROTOCOL = "graphql-transport-ws";
const TOKEN_KEY = "kinflow.inspector.token";

/** An operation refused by the server; `code` is the first error's extensions.code. */
export class GraphQLError extends Error {
  constructor(errors, status = 200) {
    const list = Array.isArray(errors) && errors.length ? errors : [{ message: String(errors) }];
    super(list.map((e) => e.message).join("; "));
    this.name = "GraphQLError";
    this.errors = list;
    this.status = status;
    const ext = list[0].extensions || {};
    this.code = ext.code || (status === 401 ? "unauthenticated" : "error");
    this.details = ext.details || {};
  }
}

/** The API token, kept for the browser tab's session only. */
export const tokenStore = {
  get() {
    try {
      return sessionStorage.getItem(TOKEN_KEY) || "";
    } catch {
      return "";
    }
  },
  set(token) {
    try {
      if (token) sessionStorage.setItem(TOKEN_KEY, token);
      else sessionStorage.removeItem(TOKEN_KEY);
    } catch {
      /* storage disabled: the token lives as long as the page */
    }
  },
};

function bearer(token) {
  return token ? `Bearer ${token}` : null;
}

let nextId = 1;

export class Client {
  /**
   * @param {object} options
   * @param {string} options.httpUrl  absolute URL of /graphql
   * @param {string} options.wsUrl    ws(s):// URL of /graphql
   * @param {() => string} options.getToken
   * @param {(reason: string) => void} [options.onAuthRequired]  the server refused the token
   * @param {(state: string) => void} [options.onStatus]  "connecting" | "open" | "closed" | "refused"
   */
  constructor({ httpUrl, wsUrl, getToken, onAuthRequired, onStatus }) {
    this.httpUrl = httpUrl;
    this.wsUrl = wsUrl;
    this.getToken = getToken;
    this.onAuthRequired = onAuthRequired || (() => {});
    this.onStatus = onStatus || (() => {});
    this.socket = null;
    this.acked = false;
    this.refused = false;
    this.retries = 0;
    this.retryTimer = null;
    this.subs = new Map(); // id -> {payload, sink, active}
  }

  /** Run a query or mutation over HTTP; resolves to `data`, rejects with GraphQLError. */
  async request(query, variables = {}) {
    const headers = { "Content-Type": "application/json", Accept: "application/json" };
    const auth = bearer(this.getToken());
    if (auth) headers.Authorization = auth;
    let response;
    try {
      response = await fetch(this.httpUrl, {
        method: "POST",
        headers,
        body: JSON.stringify({ query, variables }),
      });
    } catch (err) {
      throw new GraphQLError([{ message: `network error: ${err.message}`, extensions: { code: "network" } }], 0);
    }
    let body = null;
    try {
      body = await response.json();
    } catch {
      throw new GraphQLError([{ message: `HTTP ${response.status}`, extensions: { code: `http-${response.status}` } }], response.status);
    }
    if (body.errors && body.errors.length) {
      const error = new GraphQLError(body.errors, response.status);
      if (error.code === "unauthenticated") this.onAuthRequired(error.message);
      throw error;
    }
    return body.data;
  }

  /**
   * Start a subscription. `sink.next(data)` gets each result's data,
   * `sink.error(GraphQLError)` its error, `sink.complete()` its end. A
   * refused subscription (an error) is over: it is never sent again. One that
   * lagged (`subscription-lagged`) resubscribes once, and one the server ended
   * normally (a finished instance, a shutdown) is sent again only after a
   * reconnect; every subscription starts with a snapshot, so nothing is lost.
   * Returns a function that stops it.
   */
  subscribe(query, variables, sink) {
    const id = String(nextId++);
    const entry = { payload: { query, variables }, sink, active: true };
    this.subs.set(id, entry);
    this._ensureSocket();
    if (this.acked) this._send({ id, type: "subscribe", payload: entry.payload });
    return () => {
      entry.active = false;
      if (this.subs.delete(id) && this.acked) this._send({ id, type: "complete" });
    };
  }

  /** Forget the socket (e.g. after a new token): reconnects and resubscribes. */
  reset() {
    this.refused = false;
    this.retries = 0;
    clearTimeout(this.retryTimer);
    this.retryTimer = null;
    if (this.socket) {
      const old = this.socket;
      this.socket = null;
      this.acked = false;
      old.onclose = null;
      old.close(1000, "reset");
    }
    if (this.subs.size) this._ensureSocket();
  }

  _send(message) {
    if (this.socket && this.socket.readyState === WebSocket.OPEN) {
      this.socket.send(JSON.stringify(message));
    }
  }

  _ensureSocket() {
    if (this.socket || this.refused || this.retryTimer) return;
    this.onStatus("connecting");
    const socket = new WebSocket(this.wsUrl, PROTOCOL);
    this.socket = socket;
    this.acked = false;
    socket.onopen = () => {
      const auth = bearer(this.getToken());
      socket.send(JSON.stringify({ type: "connection_init", payload: auth ? { authorization: auth } : {} }));
    };
    socket.onmessage = (event) => this._receive(socket, event.data);
    socket.onclose = (event) => this._closed(socket, event);
  }

  _receive(socket, raw) {
    if (socket !== this.socket) return;
    let message;
    try {
      message = JSON.parse(raw);
    } catch {
      return;
    }
    const entry = message.id ? this.subs.get(message.id) : null;
    switch (message.type) {
      case "connection_ack":
        this.acked = true;
        this.retries = 0;
        this.onStatus("open");
        for (const [id, sub] of this.subs) {
          if (sub.retrying) continue; // its timer sends it
          sub.ended = false;
          this._send({ id, type: "subscribe", payload: sub.payload });
        }
        break;
      case "ping":
        this._send({ type: "pong" });
        break;
      case "next":
        if (!entry) break;
        if (message.payload.errors && message.payload.errors.length) {
          this._failed(message.id, entry, new GraphQLError(message.payload.errors));
        } else {
          entry.sink.next(message.payload.data);
        }
        break;
      case "error":
        if (entry) this._failed(message.id, entry, new GraphQLError(message.payload));
        break;
      case "complete":
        // Ended by the server: a lagged one is already being resubscribed; any other
        // stays ended until a reconnect (after a shutdown) subscribes it afresh.
        if (entry && entry.active && !entry.retrying) {
          entry.ended = true;
          if (entry.sink.complete) entry.sink.complete();
        }
        break;
      default:
        break;
    }
  }

  _failed(id, entry, error) {
    if (error.code === "subscription-lagged" || (error.details && error.details.resubscribe)) {
      this._resubscribeLater(id, entry);
      return;
    }
    // Refused (e.g. instance-not-found): report it once and forget it, so neither the
    // `complete` that follows nor a reconnect sends it again.
    this.subs.delete(id);
    entry.active = false;
    if (entry.sink.error) entry.sink.error(error);
  }

  _resubscribeLater(id, entry) {
    if (entry.retrying) return;
    entry.retrying = true;
    setTimeout(() => {
      entry.retrying = false;
      if (entry.active && this.subs.get(id) === entry && this.acked) {
        entry.ended = false;
        this._send({ id, type: "subscribe", payload: entry.payload });
      }
    }, 250);
  }

  _closed(socket, event) {
    if (socket !== this.socket) return;
    this.socket = null;
    this.acked = false;
    if (event.code === 4403 || event.code === 4401) {
      this.refused = true;
      this.onStatus("refused");
      this.onAuthRequired("the server refused the websocket's token");
      return;
    }
    this.onStatus("closed");
    if (!this.subs.size) return;
    const delay = Math.min(10000, 300 * 2 ** this.retries++);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      this._ensureSocket();
    }, delay);
  }
}

/** The client for the /graphql endpoint beside the page. */
export function clientFor(location, options) {
  const http = new URL("../graphql", location.href);
  const ws = new URL(http.href);
  ws.protocol = http.protocol === "https:" ? "wss:" : "ws:";
  return new Client({ httpUrl: http.href, wsUrl: ws.href, ...options });
}
