// The cohort verbs on a selection of rows: redrive, fire an action on each
// child, cancel, abort. Each goes out as one bulk mutation (redriveCohort,
// fireCohort, cancelCohort, abortCohort) with `where: {rowKeys}` naming the
// selected rows it can apply to; its BulkResult is shown under the toolbar.
//
// This module draws the toolbar, the confirmation forms and the result; the
// page (app.js) owns the state, the requests and the redraws.

import { h } from "./dom.js";
import { GraphQLError } from "./gql.js";

const LIVE = ["ACTIVE", "QUEUED"];

/**
 * Which selected rows a verb is sent for. The server decides in the end (a row that
 * changed meanwhile comes back skipped or refused); this keeps the counts honest.
 * `outcome` is the row's outcome as the page judges it (older rows carry none).
 */
export const VERBS = {
  redrive: {
    button: "Redrive selected",
    title: "redriveCohort: a new attempt for each selected failed, aborted or cancelled row",
    applies: (row, outcome) => ["DONE", "ABORTED", "CANCELLED"].includes(row.status) &&
      ["failed", "aborted", "cancelled"].includes(outcome),
  },
  fire: {
    button: "Fire action on selected",
    title: "fireCohort: fire one action on each selected live child",
    applies: (row) => row.status === "ACTIVE",
  },
  cancel: {
    button: "Cancel selected",
    title: "cancelCohort: each selected child runs its cancel stage; a queued row is skipped as cancelled",
    applies: (row) => (row.status === "ACTIVE" && !row.cancelling) || row.status === "QUEUED",
  },
  abort: {
    button: "Abort selected",
    title: "abortCohort: each selected child stops at once, without cleanup; a queued row is skipped",
    applies: (row) => LIVE.includes(row.status),
  },
};

/** Only rows of the visit that spawned them (current) take a verb. */
export function canApply(verb, row, outcome) {
  return Boolean(row && row.current && VERBS[verb].applies(row, outcome));
}

/** A row gets a checkbox when any verb could be sent for it. */
export function pickable(row, outcome) {
  return Object.keys(VERBS).some((verb) => canApply(verb, row, outcome));
}

/** The selected row keys `verb` is sent for. */
export function eligibleKeys(cohort, verb, outcomeOf) {
  return [...cohort.picked].filter((key) => {
    const row = cohort.byKey.get(key);
    return row && canApply(verb, row, outcomeOf(row));
  });
}

/**
 * The toolbar: one button per verb with the count it would be sent for, the
 * selection helpers, and the last call's BulkResult.
 * `on` = {verb(name), pickFailed(), clear()}.
 */
export function verbToolbar(cohort, outcomeOf, on) {
  const busy = Boolean(cohort.bulk && cohort.bulk.busy);
  const buttons = Object.entries(VERBS).map(([name, verb]) => {
    const n = eligibleKeys(cohort, name, outcomeOf).length;
    return h(`button.verb.${name}-selected`, {
      type: "button",
      dataset: { verb: name, count: String(n) },
      "aria-pressed": cohort.form && cohort.form.verb === name ? "true" : "false",
      disabled: !n || busy,
      title: verb.title,
      onclick: () => on.verb(name),
    }, `${verb.button} (${n})`);
  });
  return h(
    "div.redrive",
    buttons,
    h("button.pick-all", {
      type: "button",
      title: "select every failed, aborted or cancelled row of this visit",
      onclick: on.pickFailed,
    }, "select all failed"),
    cohort.picked.size ? h("button.clear-picked", { type: "button", onclick: on.clear }, "clear") : null,
    busy ? h("span.dim.busy", `${cohort.bulk.busy}…`) : null,
    cohort.bulk && cohort.bulk.result ? bulkResult(cohort.bulk) : null,
  );
}

function bulkResult(bulk) {
  const r = bulk.result;
  return h(
    "span.bulk-result",
    {
      role: "status",
      dataset: { verb: bulk.verb, matched: String(r.matched), applied: String(r.applied),
        skipped: String(r.skipped), refused: String(r.refusals.length) },
    },
    h("strong", bulk.label), ": ",
    `matched ${r.matched} · applied ${r.applied} · skipped ${r.skipped} · refused ${r.refusals.length}`,
    r.refusals.length
      ? h("ul.refusals", r.refusals.map((f) =>
          h("li", { dataset: { rowKey: f.rowKey, code: f.code } }, h("strong", f.rowKey), ` ${f.code}: ${f.message}`)))
      : null,
  );
}

/**
 * The form a verb opens before it is sent: fire asks for the child action and
 * optional params, cancel and abort ask to confirm (with an optional reason).
 * Built once per opening, so a live redraw never loses what was typed.
 * `actions` = [{activity, action}] the selected children may be fired;
 * `on` = {submit(values), close(), error(e)}. Returns {verb, el, count}.
 */
export function verbForm(verb, actions, on) {
  const count = h("span.n");
  const close = h("button.close", { type: "button", onclick: on.close }, verb === "fire" ? "Close" : "Keep them running");
  let fields;
  let confirm;
  if (verb === "fire") {
    fields = [
      h("label", h("span", "Child action"),
        actions.length
          ? h("select", { name: "action", required: true },
              actions.map((a) => h("option", { value: `${a.activity}/${a.action}` }, `${a.activity} › ${a.action}`)))
          : h("input", { name: "action", required: true, placeholder: "activity/action" })),
      h("label", h("span", "Params (JSON, optional)"),
        h("textarea", { name: "params", rows: 2, placeholder: '{"words": 300}' })),
    ];
    confirm = h("button.primary.confirm", { type: "submit" }, "Fire on ", count, " children");
  } else {
    const what = verb === "cancel"
      ? "Each child leaves its stage and runs its cancel stage; its row stays active (cancelling) until that ends. Queued rows are skipped as cancelled."
      : "Each child stops at once, without running any cleanup. Queued rows are skipped.";
    fields = [
      h("p.small", what),
      h("label", h("span", "Reason (optional)"), h("input", { name: "reason", autocomplete: "off" })),
    ];
    confirm = h("button.primary.confirm", { type: "submit" }, verb === "cancel" ? "Cancel " : "Abort ", count, " children");
  }
  const el = h(
    "form.verb-form",
    {
      dataset: { verb },
      onsubmit: (event) => {
        event.preventDefault();
        let values;
        try {
          values = readVerbForm(verb, el);
        } catch (error) {
          on.error(error);
          return;
        }
        on.submit(values);
      },
    },
    h("h4", VERBS[verb].button),
    fields,
    h("div.buttons", confirm, close),
  );
  return { verb, el, count };
}

function readVerbForm(verb, form) {
  if (verb !== "fire") return { reason: form.elements.reason.value.trim() || null };
  const [activity, action] = form.elements.action.value.split("/");
  if (!activity || !action) {
    throw new GraphQLError([{ message: "pick the child action to fire", extensions: { code: "action-params-invalid" } }]);
  }
  const raw = form.elements.params.value.trim();
  let params = null;
  if (raw) {
    try {
      params = JSON.parse(raw);
    } catch {
      throw new GraphQLError([{ message: "params are not valid JSON", extensions: { code: "action-params-invalid" } }]);
    }
  }
  return { childActivity: activity, action, params };
}
