// Parked instances: the heartbeat stopped retrying them after a permanent
// refusal (cascade-limit, say) and waits out a back-off; a tick retries now.

import { h, when } from "./dom.js";

export const PARKED_QUERY = `query Parked($ids: [ID!]) {
  parkedInstances(ids: $ids, first: 100) { instanceId kind code message until failures } }`;
export const TICK_MUTATION = `mutation Tick($id: ID!) { tick(instanceId: $id) { changed } }`;

function shortId(id) {
  return id.length > 22 ? `${id.slice(0, 12)}…${id.slice(-8)}` : id;
}

// The left pane's list: one line per parked instance, a click opens its family.
export function parkedList(items, open) {
  return items.map((p) =>
    h("li.result.parked", { dataset: { id: p.instanceId, code: p.code }, onclick: () => open(p.instanceId) },
      h("div.line", h("strong", p.code), h("span.dim", `until ${when(p.until)}`)),
      h("div.line.dim", h("span.mono", shortId(p.instanceId)), h("span", `${p.failures}×`))));
}

// The detail pane's notice on a parked instance, with the tick that un-parks it.
export function parkedNotice(p, tick) {
  if (!p) return null;
  return h("div.parked-notice", { role: "status", dataset: { code: p.code } },
    h("strong", "Parked"),
    ` by the heartbeat after ${p.code} (${p.kind}, ${p.failures} failure${p.failures === 1 ? "" : "s"} in a row): `,
    p.message,
    h("div.line.dim", `next attempt ${when(p.until)}`),
    h("button", { type: "button", onclick: tick }, "Tick now"));
}
