// The kinflow inspector: search instances, look at one's family tree and
// cohorts, fire its actions, and watch it all change live.
//
// State flows one way: GraphQL results and subscription events update the
// `state` object, and render functions (coalesced to one per frame) redraw
// from it. Cohort rows live in virtualised lists, so a cohort of thousands of
// children costs a few dozen DOM nodes.

import { clientFor, GraphQLError, tokenStore } from "./gql.js";
import { coalesce, fill, h, when } from "./dom.js";
import { VirtualList } from "./vlist.js";
import { PARKED_QUERY, parkedList, parkedNotice, TICK_MUTATION } from "./parked.js";
import { canApply, eligibleKeys, pickable, verbForm, verbToolbar, VERBS } from "./cohortverbs.js";

// ---- operations ---------------------------------------------------------

const INSTANCE = "id definition version status currentStage lastChangedAt startedAt";
const ROW = `rowKey activity action definition current status stage condemned childId spawnedAt
  outcome outputs outputsError attempt previousChildIds abortReason cancelling
  priority key startedAt deadlineAt retryAt`;
const COUNTS = `activity total active done aborted queued cancelled failed settled maxActive closed
  budget { count percent used exceeded stopped }
  paused pausedReason maxActivePerKey startRate registering retrying timedOut complete aggregates
  keys(first: 12) { nodes { key active queued } totalCount }`;
/** Rows read per request: a large cohort is read page by page (Cohort.page). */
const PAGE_ROWS = 500;
/** Rows the tree holds of one cohort at most; past it, the section says how many it shows. */
const MAX_ROWS = 20000;
const DETAIL = `${INSTANCE} startedAt completedAt abortedAt cancellingAt cancelledAt cancelReason fields
  parent { id definition }
  activities { name status firedActions }
  availableActions { activity action enabled reason params }
  pendingEffects { key name claimed queuedAt }
  history(last: 10) { type at data }`;

const BULK_RESULT = "matched applied skipped refusals { childId rowKey code message }";

const Q = {
  definitions: `query { definitions { name title version lifecycle document } }`,
  search: `query Search($where: InstanceFilter, $after: String) {
    instances(where: $where, first: 50, after: $after, newestFirst: true) {
      nodes { ${INSTANCE} }
      pageInfo { hasNextPage endCursor }
      totalCount
    } }`,
  focus: `query Focus($id: ID!) { instance(id: $id) {
    ${INSTANCE}
    ancestors { ${INSTANCE} } } }`,
  // The activity's cohort of the current visit, else of the last visit that spawned
  // (so a finished or aborted family is shown whole).
  cohort: `query Cohort($id: ID!, $activity: String!, $after: String) {
    cohort(parentId: $id, activity: $activity) { ${COUNTS}
      page(first: ${PAGE_ROWS}, after: $after) { nodes { ${ROW} } pageInfo { hasNextPage endCursor } } } }`,
  redrive: `mutation Redrive($id: ID!, $activity: String!, $where: CohortFilter, $key: String) {
    redriveCohort(parentId: $id, activity: $activity, where: $where, idempotencyKey: $key) { ${BULK_RESULT} } }`,
  fireCohort: `mutation FireCohort($id: ID!, $activity: String!, $where: CohortFilter, $childActivity: String!,
      $action: String!, $params: JSON, $key: String) {
    fireCohort(parentId: $id, activity: $activity, where: $where, childActivity: $childActivity, action: $action,
      params: $params, idempotencyKey: $key) { ${BULK_RESULT} } }`,
  cancelCohort: `mutation CancelCohort($id: ID!, $activity: String!, $where: CohortFilter, $reason: String, $key: String) {
    cancelCohort(parentId: $id, activity: $activity, where: $where, reason: $reason, idempotencyKey: $key) { ${BULK_RESULT} } }`,
  pauseCohort: `mutation PauseCohort($id: ID!, $activity: String!, $reason: String, $key: String) {
    pauseCohort(parentId: $id, activity: $activity, reason: $reason, idempotencyKey: $key) { ${COUNTS} } }`,
  resumeCohort: `mutation ResumeCohort($id: ID!, $activity: String!, $key: String) {
    resumeCohort(parentId: $id, activity: $activity, idempotencyKey: $key) { ${COUNTS} } }`,
  abortCohort: `mutation AbortCohort($id: ID!, $activity: String!, $where: CohortFilter, $reason: String, $key: String) {
    abortCohort(parentId: $id, activity: $activity, where: $where, reason: $reason, idempotencyKey: $key) { ${BULK_RESULT} } }`,
  cancel: `mutation Cancel($id: ID!, $reason: String, $key: String) {
    cancelInstance(instanceId: $id, reason: $reason, idempotencyKey: $key) { changed instance { ${DETAIL} } } }`,
  detail: `query Detail($id: ID!) { instance(id: $id) { ${DETAIL} } }`,
  fire: `mutation Fire($id: ID!, $activity: String!, $action: String!, $params: JSON, $key: String) {
    fireAction(instanceId: $id, activity: $activity, action: $action, params: $params, idempotencyKey: $key) {
      changed cascaded instance { ${DETAIL} } } }`,
  watchInstance: `subscription WatchInstance($id: ID!) {
    instanceChanged(id: $id) { kind at instance { ${DETAIL} } } }`,
  watchFocus: `subscription WatchFocus($id: ID!) {
    instanceChanged(id: $id) { kind instance { ${INSTANCE} } } }`,
  watchChildren: `subscription WatchChildren($id: ID!) {
    childChanged(parentId: $id) { kind row { ${ROW} } } }`,
  watchCohort: `subscription WatchCohort($id: ID!, $activity: String!) {
    cohortChanged(parentId: $id, activity: $activity) { ${COUNTS} } }`,
  watchList: `subscription WatchList($where: InstanceFilter) {
    instancesChanged(where: $where) { kind instance { ${INSTANCE} } } }`,
};

// ---- state --------------------------------------------------------------

const ROW_HEIGHT = 30;

const state = {
  defs: new Map(), // name -> {title, lifecycle, spawns: Map(stage -> Set(activity))}
  search: { where: {}, nodes: [], index: new Map(), cursor: null, hasNext: false, total: 0, loading: false },
  focus: null, // {id, instance, ancestors, cohorts: Map(activity -> Cohort), error}
  selected: null, // {id, instance, error, form}
  expanded: new Map(), // childId -> {rows: Map, order: [], status, unsub}
  subs: { list: null, focus: [], selected: null },
  parked: [], // what the heartbeat parked (parkedInstances), most recent first
};

const el = {};
const client = clientFor(window.location, {
  getToken: () => tokenStore.get(),
  onAuthRequired: (reason) => openTokenDialog(reason),
  onStatus: (status) => {
    el.conn.dataset.state = status;
    el.conn.title = `live updates: ${status}`;
    fill(el.connText, { open: "live", connecting: "connecting…", closed: "reconnecting…", refused: "token refused" }[status] || status);
  },
});

// ---- errors -------------------------------------------------------------

function showError(error, context) {
  const code = error instanceof GraphQLError ? error.code : "error";
  const key = `${code}|${error.message}`;
  for (const shown of el.errors.children) if (shown.dataset.key === key) return; // one banner each
  const item = h(
    "li.error",
    { dataset: { code, key } },
    h("span.code", code),
    h("span.message", context ? `${context}: ${error.message}` : error.message),
    h("button.dismiss", { type: "button", title: "dismiss", onclick: () => item.remove() }, "×"),
  );
  el.errors.prepend(item);
  while (el.errors.children.length > 6) el.errors.lastElementChild.remove();
  if (!(error instanceof GraphQLError)) console.error(error);
}

function clearErrors() {
  el.errors.replaceChildren();
}

// ---- definitions --------------------------------------------------------

/**
 * Terminal stages that mean the child failed: marked `outcome: "failed"`, or reached
 * only by transitions whose condition is about a failure (`$anyActivityFailed`).
 * Rows stored before rows carried an outcome have none: for them, this is how a failed
 * child is told from a succeeded one.
 */
function failureStagesOf(document) {
  const stages = document.stages || [];
  const incoming = new Map();
  for (const stage of stages) {
    for (const t of stage.transitions || []) {
      if (!incoming.has(t.to)) incoming.set(t.to, []);
      incoming.get(t.to).push(String(t.when || ""));
    }
  }
  const failed = new Set();
  for (const stage of stages) {
    if ((stage.transitions || []).length) continue;
    const into = incoming.get(stage.name) || [];
    if (stage.outcome === "failed" || (into.length && into.every((when) => /fail/i.test(when)))) {
      failed.add(stage.name);
    }
  }
  return failed;
}

function spawnsOf(document) {
  const spawns = new Map();
  for (const stage of document.stages || []) {
    const acts = new Set();
    for (const activity of stage.activities || []) {
      if ((activity.actions || []).some((action) => action.spawn)) acts.add(activity.name);
    }
    if (acts.size) spawns.set(stage.name, acts);
  }
  return spawns;
}

/**
 * The actions a caller may fire on an instance of the definition, in any stage:
 * those without a `when` (the engine fires the others itself). fireCohort offers these.
 */
function callableActionsOf(document) {
  const found = new Map();
  for (const stage of document.stages || []) {
    for (const activity of stage.activities || []) {
      for (const action of activity.actions || []) {
        if (action.when !== undefined && action.when !== null) continue;
        const key = `${activity.name}/${action.name}`;
        if (!found.has(key)) found.set(key, { activity: activity.name, action: action.name, stage: stage.name });
      }
    }
  }
  return [...found.values()];
}

async function loadDefinitions() {
  const data = await client.request(Q.definitions);
  state.defs.clear();
  for (const def of data.definitions) {
    const doc = def.document || {};
    state.defs.set(def.name, { title: def.title, lifecycle: def.lifecycle, spawns: spawnsOf(doc),
      failureStages: failureStagesOf(doc), callable: callableActionsOf(doc) });
  }
  const current = el.defSelect.value;
  fill(
    el.defSelect,
    h("option", { value: "" }, "any definition"),
    [...state.defs.keys()].sort().map((name) => h("option", { value: name }, name)),
  );
  el.defSelect.value = state.defs.has(current) ? current : "";
}

function spawningActivities(instance) {
  const def = state.defs.get(instance.definition);
  return def ? def.spawns.get(instance.currentStage) || new Set() : new Set();
}

/** Every activity of any stage that spawns: a finished family's cohorts are among these. */
function allSpawning(definition) {
  const def = state.defs.get(definition);
  const all = new Set();
  if (def) for (const acts of def.spawns.values()) for (const a of acts) all.add(a);
  return all;
}

/**
 * The row's outcome when it carries one; else its status for a live, queued or
 * aborted row, and for a DONE row of an older engine "failed" when it ended in a
 * failure stage, "succeeded" otherwise.
 */
function outcomeOf(row) {
  if (row.outcome) return row.outcome;
  if (row.status !== "DONE") return row.status.toLowerCase();
  const def = state.defs.get(row.definition);
  return def && def.failureStages.has(row.stage) ? "failed" : "succeeded";
}

/** One cohort with its rows, read page by page (at most MAX_ROWS of them). */
async function fetchCohort(id, activity) {
  let after = null;
  let cohort = null;
  const rows = [];
  for (;;) {
    const c = (await client.request(Q.cohort, { id, activity, after })).cohort;
    const { page, ...counts } = c;
    if (!cohort) cohort = counts;
    rows.push(...page.nodes);
    if (!page.pageInfo.hasNextPage || rows.length >= MAX_ROWS) {
      cohort.truncated = page.pageInfo.hasNextPage;
      break;
    }
    after = page.pageInfo.endCursor;
  }
  cohort.rows = rows;
  return cohort;
}

/** The cohorts of `id`'s spawning activities: Map(activity -> {counts..., rows}). */
async function fetchCohorts(id, activities) {
  const found = new Map();
  const answers = await Promise.allSettled(
    [...activities].map((activity) => fetchCohort(id, activity)),
  );
  for (const answer of answers) {
    if (answer.status === "fulfilled") {
      const c = answer.value;
      found.set(c.activity, c);
    } else if (answer.reason.code !== "cohort-not-found") {
      throw answer.reason; // (an activity of a newer version than the instance's is skipped)
    }
  }
  return found;
}

function maySpawn(definition) {
  const def = state.defs.get(definition);
  return Boolean(def && def.spawns.size);
}

// ---- small renderers ----------------------------------------------------

function badge(status) {
  const s = String(status || "").toLowerCase();
  return h(`span.badge.status-${s}`, { dataset: { status: s } }, s);
}

function shortId(id) {
  return id.length > 20 ? `${id.slice(0, 9)}…${id.slice(-6)}` : id;
}

function go(focusId, selectedId = focusId) {
  const params = new URLSearchParams({ focus: focusId });
  if (selectedId && selectedId !== focusId) params.set("sel", selectedId);
  window.location.hash = params.toString();
}

function route() {
  const params = new URLSearchParams(window.location.hash.slice(1));
  return { focus: params.get("focus"), sel: params.get("sel") || params.get("focus") };
}

// ---- search -------------------------------------------------------------

async function runSearch(more = false) {
  const s = state.search;
  if (!more) {
    s.where = {};
    if (el.defSelect.value) s.where.definition = el.defSelect.value;
    if (el.statusSelect.value) s.where.status = el.statusSelect.value;
    if (el.rootsOnly.checked) s.where.rootsOnly = true;
    s.nodes = [];
    s.index = new Map();
    s.cursor = null;
    watchList();
  }
  s.loading = true;
  renderSearch();
  try {
    const data = await client.request(Q.search, { where: s.where, after: more ? s.cursor : null });
    const page = data.instances;
    for (const node of page.nodes) {
      if (s.index.has(node.id)) continue;
      s.index.set(node.id, node);
      s.nodes.push(node);
    }
    s.nodes.sort(newerFirst); // an instance a live event added before this page stays in its place
    s.cursor = page.pageInfo.endCursor;
    s.hasNext = page.pageInfo.hasNextPage;
    s.total = page.totalCount;
  } catch (error) {
    showError(error, "search");
  } finally {
    s.loading = false;
    renderSearch();
  }
}

/** The list's order, as instances(newestFirst: true) gives it: started later first, then by id. */
function newerFirst(a, b) {
  const [x, y] = [a.startedAt || "", b.startedAt || ""];
  if (x !== y) return x < y ? 1 : -1;
  return a.id < b.id ? 1 : a.id > b.id ? -1 : 0;
}

function watchList() {
  if (state.subs.list) state.subs.list();
  const s = state.search;
  const where = s.where;
  state.subs.list = client.subscribe(Q.watchList, { where }, {
    next: (data) => {
      if (s.where !== where) return;
      const { kind, instance } = data.instancesChanged;
      const known = s.index.get(instance.id);
      if (known) {
        Object.assign(known, instance);
      } else if (kind !== "snapshot") {
        s.index.set(instance.id, instance);
        const at = s.nodes.findIndex((node) => newerFirst(instance, node) < 0);
        s.nodes.splice(at < 0 ? s.nodes.length : at, 0, instance);
        s.total += 1;
      } else {
        return;
      }
      scheduleSearch();
    },
    error: (error) => showError(error, "live search"),
  });
}

function renderSearch() {
  const s = state.search;
  const current = state.focus && state.focus.id;
  fill(
    el.results,
    s.nodes.map((node) =>
      h(
        "li.result",
        {
          dataset: { id: node.id, status: node.status.toLowerCase() },
          class: node.id === current ? "result current" : "result",
          onclick: () => go(node.id),
        },
        h("div.line", h("strong", node.definition), badge(node.status)),
        h("div.line.dim", h("span.mono", shortId(node.id)), h("span", node.currentStage)),
      ),
    ),
  );
  fill(
    el.searchInfo,
    s.loading ? "searching…" : `${s.nodes.length} of ${s.total} instance${s.total === 1 ? "" : "s"}`,
  );
  el.more.hidden = !s.hasNext;
}
const scheduleSearch = coalesce(renderSearch);

// ---- focus: the family tree ---------------------------------------------

function stopFocus() {
  for (const stop of state.subs.focus) stop();
  state.subs.focus = [];
  for (const entry of state.expanded.values()) if (entry.unsub) entry.unsub();
  state.expanded.clear();
}

async function openFocus(id) {
  if (state.focus && state.focus.id === id && !state.focus.error) return;
  stopFocus();
  state.focus = { id, instance: null, ancestors: [], cohorts: new Map(), error: null, loading: true,
    loads: new Set() }; // loads: the live events seen by each cohort read in flight
  renderTree();
  let data;
  try {
    data = await client.request(Q.focus, { id });
  } catch (error) {
    state.focus.error = error;
    state.focus.loading = false;
    showError(error, `open ${id}`);
    renderTree();
    return;
  }
  if (!state.focus || state.focus.id !== id) return;
  const focus = state.focus;
  focus.loading = false;
  if (!data.instance) {
    focus.error = new GraphQLError([{ message: `no instance '${id}'`, extensions: { code: "instance-not-found" } }]);
    showError(focus.error, "open");
    renderTree();
    return;
  }
  focus.instance = data.instance;
  focus.ancestors = data.instance.ancestors;
  for (const activity of spawningActivities(focus.instance)) ensureCohort(activity);
  const loading = loadCohorts(focus);
  renderTree(); // the lineage now, its cohorts marked loading until their rows are in
  await loading;
  if (state.focus !== focus) return;
  state.subs.focus.push(
    client.subscribe(Q.watchFocus, { id }, {
      next: (d) => {
        if (state.focus !== focus) return;
        const before = focus.instance;
        focus.instance = { ...focus.instance, ...d.instanceChanged.instance };
        for (const activity of spawningActivities(focus.instance)) ensureCohort(activity);
        if (before.currentStage !== focus.instance.currentStage || before.status !== focus.instance.status) {
          loadCohorts(focus).then(scheduleTree); // a new visit, or the family finished
        }
        scheduleTree();
      },
      error: (error) => showError(error, "live instance"),
    }),
    client.subscribe(Q.watchChildren, { id }, {
      next: (d) => {
        if (state.focus !== focus) return;
        applyRow(focus, d.childChanged.row);
        scheduleTree();
      },
      error: (error) => showError(error, "live children"),
    }),
  );
  renderTree();
  renderSearch();
}

/** (Re)load every cohort of the focus: the current visit's, else the last that spawned. */
async function loadCohorts(focus) {
  let found;
  focus.cohortsLoading = true;
  // Live events that arrive while the pages are read may be newer than what the pages
  // say: they are kept aside and applied again on top of the pages, in their order.
  const arrived = { rows: [], counts: new Map() };
  focus.loads.add(arrived);
  try {
    found = await fetchCohorts(focus.id, allSpawning(focus.instance.definition));
    focus.cohortsError = null;
  } catch (error) {
    focus.cohortsError = error;
    showError(error, "cohorts");
    return;
  } finally {
    focus.loads.delete(arrived);
    focus.cohortsLoading = focus.loads.size > 0;
  }
  if (state.focus !== focus) return;
  focus.cohortsRead = true;
  const here = spawningActivities(focus.instance);
  for (const [activity, c] of found) {
    if (!c.total && !here.has(activity)) continue;
    const cohort = ensureCohort(activity);
    cohort.rows = new Map();
    cohort.byKey = new Map();
    cohort.place = new Map();
    cohort.order = [];
    const { rows, truncated, ...counts } = c;
    cohort.counts = counts;
    cohort.loaded = true;
    cohort.truncated = truncated;
    for (const row of rows) putRow(cohort, row);
    for (const row of arrived.rows) {
      if (row.activity === activity && (row.current || cohort.rows.has(row.childId))) putRow(cohort, row);
    }
    if (arrived.counts.has(activity)) cohort.counts = arrived.counts.get(activity);
    for (const key of [...cohort.picked]) if (!pickableRow(cohort.byKey.get(key))) cohort.picked.delete(key);
  }
}

/**
 * Insert or update one row. Rows are kept by child id; a redriven row (a new
 * attempt, a new child id) replaces its earlier attempts in place.
 */
function putRow(cohort, row) {
  const earlier = (row.previousChildIds || []).filter((id) => cohort.rows.has(id));
  for (const id of earlier) cohort.rows.delete(id);
  if (!cohort.rows.has(row.childId)) {
    const at = earlier.length ? cohort.order.indexOf(earlier[earlier.length - 1]) : -1;
    if (at >= 0) cohort.order[at] = row.childId;
    else cohort.order.push(row.childId);
    cohort.unsorted = true;
  }
  if (earlier.length) cohort.order = cohort.order.filter((id) => id === row.childId || cohort.rows.has(id));
  cohort.rows.set(row.childId, row);
  if (row.current || !cohort.byKey.has(row.rowKey)) cohort.byKey.set(row.rowKey, row);
  if (!cohort.place.has(row.rowKey)) cohort.place.set(row.rowKey, cohort.place.size);
}

/** A finished row whose child failed, was aborted or cancelled: redriveCohort may start it again. */
function redrivable(row) {
  return Boolean(row) && canApply("redrive", row, outcomeOf(row));
}

/** A row of the visit that spawned it some cohort verb applies to (live, or redrivable). */
function pickableRow(row) {
  return Boolean(row) && pickable(row, outcomeOf(row));
}

function ensureCohort(activity) {
  const focus = state.focus;
  let cohort = focus.cohorts.get(activity);
  if (cohort) return cohort;
  cohort = {
    activity,
    counts: null,
    rows: new Map(),
    byKey: new Map(), // rowKey -> its latest row
    place: new Map(), // rowKey -> its place in registry order
    order: [],
    filter: "",
    picked: new Set(), // rowKeys ticked for a cohort verb
    bulk: null, // {busy: verb} while a verb is out, then {verb, label, result}: its BulkResult
    form: null, // the open verb form: {verb, el, count}
    list: new VirtualList({
      rowHeight: ROW_HEIGHT,
      maxRows: 14,
      key: (item) => item.key,
      render: (item) => renderTreeRow(item),
    }),
  };
  focus.cohorts.set(activity, cohort);
  state.subs.focus.push(
    client.subscribe(Q.watchCohort, { id: focus.id, activity }, {
      next: (d) => {
        if (state.focus !== focus) return;
        cohort.counts = d.cohortChanged;
        for (const load of focus.loads) load.counts.set(activity, d.cohortChanged);
        scheduleTree();
      },
      error: (error) => showError(error, `live cohort ${activity}`),
    }),
  );
  return cohort;
}

/** Insert or update one registry row of the focus (an older visit's row never joins). */
function applyRow(focus, row) {
  for (const load of focus.loads) load.rows.push(row);
  const cohort = ensureCohort(row.activity);
  if (!row.current && !cohort.rows.has(row.childId)) return;
  putRow(cohort, row);
}

/**
 * Rows in registry (forEach) order: the order the cohort's pages gave, rows that
 * arrived later after them. A redriven row keeps its row key, hence its place.
 */
function sortCohort(cohort) {
  cohort.unsorted = false;
  const rows = cohort.rows;
  const place = (row) => cohort.place.get(row.rowKey);
  cohort.order.sort((a, b) => {
    const ra = rows.get(a);
    const rb = rows.get(b);
    return place(ra) - place(rb) || (ra.spawnedAt < rb.spawnedAt ? -1 : ra.spawnedAt > rb.spawnedAt ? 1 : 0);
  });
}

function toggleExpand(row) {
  const existing = state.expanded.get(row.childId);
  if (existing) {
    if (existing.unsub) existing.unsub();
    state.expanded.delete(row.childId);
    scheduleTree();
    return;
  }
  const entry = { rows: new Map(), order: [], status: "loading", unsub: null };
  state.expanded.set(row.childId, entry);
  scheduleTree();
  const apply = (r) => {
    if (!r.current && !entry.rows.has(r.childId)) return; // an older visit's row
    if (!entry.rows.has(r.childId)) entry.order.push(r.childId);
    entry.rows.set(r.childId, r);
  };
  fetchCohorts(row.childId, allSpawning(row.definition))
    .then((found) => {
      if (state.expanded.get(row.childId) !== entry) return;
      for (const c of found.values()) for (const r of c.rows) apply(r);
      entry.status = "ready";
      entry.unsub = client.subscribe(Q.watchChildren, { id: row.childId }, {
        next: (d) => {
          if (state.expanded.get(row.childId) !== entry) return;
          apply(d.childChanged.row);
          scheduleTree();
        },
        error: (error) => showError(error, "live grandchildren"),
      });
      scheduleTree();
    })
    .catch((error) => {
      entry.status = "error";
      showError(error, `children of ${row.childId}`);
      scheduleTree();
    });
}

function treeItems(cohort) {
  if (cohort.unsorted) sortCohort(cohort);
  const items = [];
  for (const id of cohort.order) {
    const row = cohort.rows.get(id);
    if (cohort.filter && !matchesChip(row, cohort.filter)) continue;
    items.push({ key: id, depth: 1, row });
    const sub = state.expanded.get(id);
    if (!sub) continue;
    if (sub.status !== "ready") {
      items.push({ key: `${id}/note`, depth: 2, note: sub.status === "error" ? "could not load" : "loading…" });
    } else if (!sub.order.length) {
      items.push({ key: `${id}/note`, depth: 2, note: "no children" });
    }
    for (const gid of sub.order) items.push({ key: `${id}/${gid}`, depth: 2, row: sub.rows.get(gid) });
  }
  return items;
}

/** The abortReason of the rows a failure budget skipped or aborted. */
const BUDGET_STOPPED = "failure-budget-exceeded";

/** A row the failure budget skipped, aborted or cancelled: its effect, not a failure of its own. */
function stoppedByBudget(row) {
  return ["aborted", "cancelled"].includes(outcomeOf(row)) && row.abortReason === BUDGET_STOPPED;
}

/**
 * The "failed" chip counts (and shows) rows whose outcome is failed or aborted, except
 * the rows the budget itself stopped (they count as aborted, as Cohort.failed does);
 * the other chips a status.
 */
function matchesChip(row, name) {
  if (name === "failed") return ["failed", "aborted", "timed-out"].includes(outcomeOf(row)) && !stoppedByBudget(row);
  return row.status.toLowerCase() === name;
}

/** A finished row's outputs, short: `wordCount: 600, locale: "de"`; or why there are none. */
function outputsText(row) {
  if (row.outputsError) return row.outputsError;
  if (!row.outputs || typeof row.outputs !== "object") return "";
  return Object.entries(row.outputs).map(([k, v]) => `${k}: ${JSON.stringify(v)}`).join(", ");
}

function pickBox(row) {
  const cohort = state.focus && state.focus.cohorts.get(row.activity);
  if (!cohort || !pickableRow(row)) return h("span.pick");
  return h("input.pick", {
    type: "checkbox",
    title: "select for a cohort verb (redrive, fire, cancel, abort)",
    "aria-label": `select ${row.rowKey}`,
    checked: cohort.picked.has(row.rowKey),
    onclick: (event) => {
      event.stopPropagation();
      if (event.target.checked) cohort.picked.add(row.rowKey);
      else cohort.picked.delete(row.rowKey);
      scheduleTree();
    },
  });
}

function renderTreeRow(item) {
  if (item.note) return h("div.tnode.depth-2.note", h("span.toggle"), h("span.dim", item.note));
  const row = item.row;
  const status = row.status.toLowerCase();
  const outcome = outcomeOf(row);
  const expandable = maySpawn(row.definition);
  const open = state.expanded.has(row.childId);
  const sub = state.expanded.get(row.childId);
  const selected = state.selected && state.selected.id === row.childId;
  const outputs = outputsText(row);
  const attempt = row.attempt || 1;
  // A cancelling child's row is still ACTIVE (its cleanup runs): drawn apart from plain active ones.
  const cancelling = Boolean(row.cancelling) && status === "active";
  return h(
    `div.tnode.depth-${item.depth}`,
    {
      class: `tnode depth-${item.depth} status-row-${status} outcome-${outcome}${selected ? " selected" : ""}` +
        `${row.condemned ? " condemned" : ""}${cancelling ? " cancelling" : ""}`,
      dataset: { childId: row.childId, rowKey: row.rowKey, status, outcome, attempt: String(attempt),
        cancelling: String(cancelling) },
      title: row.childId,
      onclick: () => go(state.focus.id, row.childId),
      ondblclick: () => go(row.childId),
    },
    item.depth === 1 && expandable
      ? h(
          "button.toggle",
          {
            type: "button",
            title: open ? "hide its children" : "show its children",
            "aria-expanded": open ? "true" : "false",
            onclick: (event) => {
              event.stopPropagation();
              toggleExpand(row);
            },
          },
          open ? "▾" : "▸",
        )
      : h("span.toggle"),
    item.depth === 1 ? pickBox(row) : null,
    cancelling ? h("span.badge.status-cancelling", { dataset: { status: "cancelling" }, title: "active: running its cancel stage" }, "cancelling") : badge(status),
    h("span.rowkey", row.rowKey),
    h("span.stage", status === "queued" ? "waiting" : row.stage || ""),
    row.condemned ? h("span.flag", "abort owed") : null,
    outcome === "failed" ? h("span.flag.failed", { title: `ended in stage ${row.stage}` }, "failed") : null,
    outcome === "timed-out" ? h("span.flag.failed.timed-out", { title: "its attempt outlived childTimeoutSeconds" }, "timed out") : null,
    row.abortReason && status === "aborted" ? h("span.flag.reason", row.abortReason) : null,
    attempt > 1 ? h("span.flag.attempt", { title: `earlier: ${(row.previousChildIds || []).join(", ")}` }, `attempt ${attempt}`) : null,
    status === "queued" && row.retryAt ? h("span.flag.retry", { title: "a retry waits until then" }, `retry at ${shortTime(row.retryAt)}`) : null,
    status === "active" && row.deadlineAt ? h("span.flag.deadline", { title: `started ${row.startedAt || "?"}` }, `deadline ${shortTime(row.deadlineAt)}`) : null,
    row.key != null ? h("span.flag.key", { title: "its concurrencyKey" }, row.key) : null,
    row.priority ? h("span.flag.priority", { title: "its priority: higher starts first" }, `p${row.priority}`) : null,
    outputs
      ? h(row.outputsError ? "span.outputs.error" : "span.outputs",
          { title: row.outputsError ? "outputs not copied" : JSON.stringify(row.outputs) }, outputs)
      : null,
    sub && sub.status === "ready" ? h("span.mini", miniCounts(sub)) : null,
    h("span.defn.dim", row.definition),
  );
}

/** A stored timestamp as HH:MM:SS (the whole one is in the tooltip of its row). */
function shortTime(at) {
  const m = /T(\d\d:\d\d:\d\d)/.exec(at || "");
  return m ? m[1] : at;
}

function miniCounts(sub) {
  let done = 0;
  for (const r of sub.rows.values()) if (r.status !== "ACTIVE" && r.status !== "QUEUED") done += 1;
  return `${done}/${sub.rows.size} settled`;
}

function progress(counts) {
  const total = counts.total || 0;
  const pct = (n) => (total ? `${(100 * n) / total}%` : "0%");
  return h(
    "div.progress",
    {
      role: "progressbar",
      "aria-valuemin": "0",
      "aria-valuemax": String(total),
      "aria-valuenow": String(counts.done + counts.aborted + (counts.cancelled || 0)),
    },
    h("div.seg.done", { style: { width: pct(counts.done) } }),
    h("div.seg.aborted", { style: { width: pct(counts.aborted) } }),
    h("div.seg.cancelled", { style: { width: pct(counts.cancelled || 0) } }),
    h("div.seg.active", { style: { width: pct(counts.active) } }),
  );
}

function localCounts(cohort) {
  const c = { total: cohort.rows.size, active: 0, done: 0, aborted: 0, queued: 0, cancelled: 0, failed: 0,
    stopped: 0, settled: false, maxActive: null, budget: null };
  for (const row of cohort.rows.values()) {
    c[row.status.toLowerCase()] += 1;
    if (matchesChip(row, "failed")) c.failed += 1;
    if (stoppedByBudget(row)) c.stopped += 1;
  }
  c.settled = c.total > 0 && c.active === 0 && c.queued === 0;
  return c;
}

/** The window and the failure budget, when the cohort has them, then its admission and settlement. */
function limits(c) {
  const parts = [];
  if (c.paused) {
    parts.push(h("span.paused", {
      dataset: { paused: "true", reason: c.pausedReason || "" },
      title: "paused: no queued row starts and no retry is admitted; live children run on",
    }, "paused", c.pausedReason ? ` · ${c.pausedReason}` : ""));
  }
  if (c.registering) {
    parts.push(h("span.registering", { title: "rows are still being registered, a batch at a time" }, "registering…"));
  }
  if (c.maxActive != null) {
    parts.push(h("span.window", { dataset: { maxActive: String(c.maxActive), queued: String(c.queued || 0) },
      title: "at most this many children are active at once; the rest wait, queued" },
    `window ${c.active}/${c.maxActive} active · ${c.queued || 0} queued`));
  }
  const b = c.budget;
  if (b) {
    const limit = b.count != null ? `${b.used}/${b.count} failed` : `${b.used} failed of ${b.percent}%`;
    parts.push(h("span.budget", {
      class: b.exceeded ? "budget exceeded" : "budget",
      dataset: { used: String(b.used), exceeded: String(b.exceeded), count: b.count != null ? String(b.count) : "" },
      title: "the failure budget: more failed or aborted rows than this fails the cohort " +
        "(the rows the budget itself stops are not failures)",
    }, `budget ${limit}`, b.exceeded ? " · exceeded" : ""));
    const stopped = b.stopped || 0;
    if (stopped) {
      parts.push(h("span.budget-stopped", {
        dataset: { stopped: String(stopped) },
        title: "rows the exceeded budget skipped, aborted or cancelled (abortReason failure-budget-exceeded): " +
          "counted as aborted or cancelled, never as failed",
      }, `${stopped} stopped by the budget`));
    }
  }
  return [...parts, ...admission(c), ...settlement(c)];
}

/** The start rate and the per-key window with each key's live and queued rows. */
function admission(c) {
  const parts = [];
  const rate = c.startRate;
  if (rate) {
    parts.push(h("span.rate", { dataset: { count: String(rate.count), perSeconds: String(rate.perSeconds) },
      title: "at most this many starts in any window of this many seconds" },
    `rate ${rate.count}/${rate.perSeconds}s`));
  }
  if (c.maxActivePerKey != null) {
    const keys = (c.keys && c.keys.nodes) || [];
    const more = c.keys ? c.keys.totalCount - keys.length : 0;
    parts.push(h("span.keys", { dataset: { maxActivePerKey: String(c.maxActivePerKey) },
      title: "at most this many active children per concurrencyKey; per key: active/queued" },
    `per key ≤${c.maxActivePerKey}: `,
    ...keys.map((k, i) => h("span.key", { dataset: { key: k.key, active: String(k.active), queued: String(k.queued) } },
      `${i ? ", " : ""}${k.key} ${k.active}/${k.queued}`)),
    more > 0 ? ` +${more} more` : ""));
  }
  return parts;
}

/** Retries waiting, timed-out rows, a quorum's completion and the aggregates. */
function settlement(c) {
  const parts = [];
  if (c.retrying) parts.push(h("span.retrying", { dataset: { retrying: String(c.retrying) } }, `${c.retrying} retrying`));
  if (c.timedOut) parts.push(h("span.timed-out", { dataset: { timedOut: String(c.timedOut) } }, `${c.timedOut} timed out`));
  if (c.complete) parts.push(h("span.complete", { title: "its completeWhen held: rows not started were skipped" }, "complete"));
  const aggregates = c.aggregates && typeof c.aggregates === "object" ? Object.entries(c.aggregates) : [];
  if (aggregates.length) {
    parts.push(h("span.aggregates", { title: "the spawn's aggregate figures over finished rows" },
      aggregates.map(([name, value]) => `${name} ${value == null ? "–" : JSON.stringify(value)}`).join(" · ")));
  }
  return parts;
}

/** Pause or resume the cohort (operator), then show its counts as the verb answers them. */
async function togglePause(cohort) {
  const focus = state.focus;
  const paused = Boolean(cohort.counts && cohort.counts.paused);
  let reason = null;
  if (!paused) {
    reason = window.prompt(`Pause cohort ${cohort.activity}: why? (optional)`, "");
    if (reason === null) return; // cancelled
  }
  const base = { id: focus.id, activity: cohort.activity, key: freshKey() };
  try {
    const answer = paused
      ? (await client.request(Q.resumeCohort, base)).resumeCohort
      : (await client.request(Q.pauseCohort, { ...base, reason: reason || null })).pauseCohort;
    if (state.focus === focus) cohort.counts = answer;
  } catch (error) {
    showError(error, `${paused ? "resume" : "pause"} of ${cohort.activity}`);
  }
  scheduleTree();
}

function pauseButton(cohort, c) {
  if (!c.total || finishedVisit(cohort)) return null;
  return h("button.pause", {
    type: "button",
    dataset: { action: c.paused ? "resume" : "pause" },
    title: c.paused ? "let queued rows and retries start again" : "hold queued rows and retries; live children run on",
    onclick: () => togglePause(cohort),
  }, c.paused ? "Resume" : "Pause");
}

/** The verb toolbar of a cohort, wired to this page. */
function cohortToolbar(cohort) {
  return verbToolbar(cohort, outcomeOf, {
    verb: (verb) => (verb === "redrive" ? runVerb(cohort, "redrive", {}) : openVerbForm(cohort, verb)),
    pickFailed: () => {
      for (const row of cohort.rows.values()) if (redrivable(row)) cohort.picked.add(row.rowKey);
      scheduleTree();
    },
    clear: () => {
      cohort.picked.clear();
      scheduleTree();
    },
  });
}

/** Open (or close, when it is open) the form of fire, cancel or abort on the selection. */
function openVerbForm(cohort, verb) {
  if (cohort.form && cohort.form.verb === verb) {
    cohort.form = null;
    scheduleTree();
    return;
  }
  const definitions = new Set();
  for (const key of eligibleKeys(cohort, verb, outcomeOf)) definitions.add(cohort.byKey.get(key).definition);
  const actions = [];
  const seen = new Set();
  for (const name of definitions) {
    const def = state.defs.get(name);
    for (const a of def ? def.callable : []) {
      const key = `${a.activity}/${a.action}`;
      if (!seen.has(key)) actions.push(a);
      seen.add(key);
    }
  }
  cohort.form = verbForm(verb, actions, {
    submit: (values) => runVerb(cohort, verb, values),
    close: () => {
      cohort.form = null;
      scheduleTree();
    },
    error: (error) => showError(error, `${verb} ${cohort.activity}`),
  });
  scheduleTree();
}

/** Send one cohort verb for the selected rows it applies to, show its BulkResult, reload. */
async function runVerb(cohort, verb, values) {
  const focus = state.focus;
  const rowKeys = eligibleKeys(cohort, verb, outcomeOf);
  if (!rowKeys.length) return;
  const base = { id: focus.id, activity: cohort.activity, where: { rowKeys }, key: freshKey() };
  const label = verb === "fire" ? `fire ${values.childActivity} › ${values.action}` : verb;
  cohort.bulk = { ...(cohort.bulk || {}), busy: label };
  scheduleTree();
  try {
    let result;
    if (verb === "redrive") result = (await client.request(Q.redrive, base)).redriveCohort;
    else if (verb === "fire") result = (await client.request(Q.fireCohort, { ...base, ...values })).fireCohort;
    else if (verb === "cancel") result = (await client.request(Q.cancelCohort, { ...base, reason: values.reason })).cancelCohort;
    else result = (await client.request(Q.abortCohort, { ...base, reason: values.reason })).abortCohort;
    cohort.bulk = { busy: null, verb, label, result };
    cohort.form = null;
    for (const key of rowKeys) cohort.picked.delete(key);
  } catch (error) {
    cohort.bulk = null;
    showError(error, `${VERBS[verb].button.toLowerCase()} of ${cohort.activity}`);
  }
  if (state.focus === focus) {
    await loadCohorts(focus); // new attempts, aborted or cancelling children, rows skipped
    scheduleTree();
  }
}

function freshKey() {
  return crypto.randomUUID ? crypto.randomUUID() : `${Date.now()}-${Math.random()}`;
}

/**
 * Redraw one cohort in place. Its section and its list's element stay in the
 * document across redraws: moving a scrolled element would lose its scroll position.
 */
function renderCohort(cohort) {
  if (!cohort.section) {
    cohort.header = h("header");
    cohort.bar = h("div.bar");
    cohort.tools = h("div.tools");
    cohort.formSlot = h("div.form-slot"); // refilled only when the form changes: typing survives live redraws
    cohort.body = h("div.body");
    cohort.section = h("section.cohort", { dataset: { activity: cohort.activity } },
      cohort.header, cohort.bar, cohort.tools, cohort.formSlot, cohort.body);
  }
  // A live count may arrive while the rows are still being read: show the rows' own
  // counts until they are in, so counts and rows never disagree on screen; and while
  // they are read say so, so a family still loading never looks like an empty cohort.
  const focus = state.focus;
  const waiting = !cohort.loaded && focus && focus.cohortsLoading;
  const failedLoad = !cohort.loaded && !waiting && focus && focus.cohortsError;
  const c = cohort.counts && !waiting ? cohort.counts : localCounts(cohort);
  const phase = waiting && !cohort.rows.size ? "loading" : failedLoad && !cohort.rows.size ? "error"
    : c.total ? "rows" : "empty";
  const chip = (name, n) =>
    h(
      `button.chip.status-${name}`,
      {
        type: "button",
        dataset: { count: name, value: String(n) },
        "aria-pressed": cohort.filter === name ? "true" : "false",
        title: cohort.filter === name ? "show every row" : `show only ${name} rows`,
        onclick: () => {
          cohort.filter = cohort.filter === name ? "" : name;
          scheduleTree();
        },
      },
      h("span.n", String(n)),
      ` ${name}`,
    );
  Object.assign(cohort.section.dataset, { total: String(c.total), settled: String(c.settled), state: phase });
  const known = phase !== "loading" && phase !== "error";
  fill(
    cohort.header,
    h("h3", "cohort ", h("span.mono", cohort.activity)),
    known
      ? h("span.counts", chip("queued", c.queued || 0), chip("active", c.active), chip("done", c.done),
          chip("aborted", c.aborted), chip("cancelled", c.cancelled || 0), chip("failed", c.failed || 0))
      : null,
    known ? limits(c) : null,
    known
      ? h("span.total", h("span.n", String(c.total)), " total", c.settled ? " · settled" : "",
          cohort.truncated ? ` · showing the first ${cohort.rows.size}` : "")
      : h("span.total.loading", phase === "loading" ? "loading…" : "could not load"),
    finishedVisit(cohort) ? h("span.visit.dim", { title: "the parent has left the stage visit that spawned these" }, "finished visit") : null,
    c.closed ? h("span.closed", { title: "a cancel or abort of the whole cohort closed it: no row joins it any more" }, "closed") : null,
    known ? pauseButton(cohort, c) : null,
  );
  cohort.section.dataset.visit = finishedVisit(cohort) ? "finished" : "current";
  let offer = Boolean(cohort.bulk) || cohort.picked.size > 0;
  if (!offer) for (const row of cohort.rows.values()) if (pickableRow(row)) { offer = true; break; }
  fill(cohort.bar, progress(c));
  fill(cohort.tools, offer ? cohortToolbar(cohort) : null);
  const form = cohort.form;
  if (form) {
    fill(form.count, String(eligibleKeys(cohort, form.verb, outcomeOf).length));
    if (cohort.formSlot.firstChild !== form.el) fill(cohort.formSlot, form.el);
  } else if (cohort.formSlot.firstChild) {
    cohort.formSlot.replaceChildren();
  }
  const items = treeItems(cohort);
  cohort.list.setItems(items);
  if (items.length) {
    if (cohort.list.el.parentNode !== cohort.body) fill(cohort.body, cohort.list.el);
    cohort.list.render(); // now, with the counts drawn above, not a frame later
  } else if (phase === "loading") {
    fill(cohort.body, h("p.dim.cohort-loading", "loading its children…"));
  } else if (phase === "error") {
    fill(cohort.body, h("p.dim.cohort-error", "could not load its children (see the error above)"));
  } else {
    fill(cohort.body, h("p.dim.cohort-empty", cohort.filter ? `no ${cohort.filter} children`
      : "empty: no child spawned in this visit yet"));
  }
  return cohort.section;
}

function finishedVisit(cohort) {
  if (!cohort.rows.size) return false;
  for (const row of cohort.rows.values()) if (row.current) return false;
  return true;
}

function treeLine(instance, depth, current) {
  return h(
    "div.tline",
    {
      class: current ? "tline focus" : "tline",
      style: { paddingLeft: `${depth * 18 + 6}px` },
      dataset: { id: instance.id, status: instance.status.toLowerCase() },
      onclick: () => go(instance.id),
    },
    badge(instance.status),
    h("strong", instance.definition),
    h("span.stage", instance.currentStage),
    h("span.mono.dim", shortId(instance.id)),
  );
}

function renderTree() {
  const focus = state.focus;
  if (!focus) {
    fill(el.tree, h("p.placeholder", "Search for instances on the left, then pick one to see its family tree."));
    return;
  }
  if (focus.loading) {
    fill(el.tree, h("p.dim", `loading ${focus.id}…`));
    return;
  }
  if (focus.error || !focus.instance) {
    fill(el.tree, h("p.placeholder", `Could not open ${focus.id}.`));
    return;
  }
  if (!focus.view || focus.view.parentNode !== el.tree) {
    focus.lineage = h("div.lineage");
    focus.cohortsEl = h("div.cohorts");
    focus.empty = h("p.dim", "no child workflows in this stage");
    focus.view = h("div.family", h("h2", "Family tree"), focus.lineage, focus.empty, focus.cohortsEl);
    fill(el.tree, focus.view);
  }
  const lines = focus.ancestors.map((a, i) => treeLine(a, i, false));
  lines.push(treeLine(focus.instance, focus.ancestors.length, true));
  fill(focus.lineage, lines);
  focus.cohortsEl.style.marginLeft = `${(focus.ancestors.length + 1) * 18}px`;
  focus.empty.hidden = focus.cohorts.size > 0;
  const reading = focus.cohortsLoading && !focus.cohortsRead;
  fill(focus.empty, reading ? "loading its child workflows…" : "no child workflows in this stage");
  focus.empty.dataset.state = reading ? "loading" : "empty";
  for (const cohort of focus.cohorts.values()) {
    const section = renderCohort(cohort);
    if (section.parentNode !== focus.cohortsEl) focus.cohortsEl.appendChild(section);
  }
}
const scheduleTree = coalesce(renderTree);

// ---- selected instance: details and actions -----------------------------

async function openSelected(id) {
  if (state.selected && state.selected.id === id && !state.selected.error) return;
  if (state.subs.selected) state.subs.selected();
  const selected = { id, instance: null, error: null, form: null, busy: false, note: "", parked: null,
    confirmCancel: false };
  state.selected = selected;
  loadSelectedParking(selected);
  renderDetail();
  scheduleTree();
  state.subs.selected = client.subscribe(Q.watchInstance, { id }, {
    next: (d) => {
      if (state.selected !== selected) return;
      selected.instance = d.instanceChanged.instance;
      selected.error = null;
      scheduleDetail();
    },
    error: (error) => {
      if (state.selected !== selected) return;
      selected.error = error;
      showError(error, `watch ${id}`);
      scheduleDetail();
    },
  });
  try {
    const data = await client.request(Q.detail, { id });
    if (state.selected !== selected) return;
    if (!data.instance) {
      selected.error = new GraphQLError([{ message: `no instance '${id}'`, extensions: { code: "instance-not-found" } }]);
    } else if (!selected.instance) {
      selected.instance = data.instance;
    }
  } catch (error) {
    if (state.selected !== selected) return;
    selected.error = error;
    showError(error, `open ${id}`);
  }
  renderDetail();
}

async function fire(verdict, params) {
  const selected = state.selected;
  selected.busy = true;
  selected.note = `firing ${verdict.activity} › ${verdict.action}…`;
  renderDetail();
  try {
    const data = await client.request(Q.fire, {
      id: selected.id,
      activity: verdict.activity,
      action: verdict.action,
      params: params || null,
      key: freshKey(),
    });
    const result = data.fireAction;
    if (state.selected === selected) {
      selected.instance = result.instance;
      selected.form = null;
      selected.note = `${verdict.activity} › ${verdict.action}: ${result.changed ? "applied" : "no change"}` +
        (result.cascaded ? `, ${result.cascaded} stage move${result.cascaded === 1 ? "" : "s"}` : "");
    }
  } catch (error) {
    showError(error, `${verdict.activity} › ${verdict.action}`);
    if (state.selected === selected) selected.note = `${verdict.activity} › ${verdict.action} refused (${error.code})`;
  } finally {
    selected.busy = false;
    renderDetail();
  }
}

function declaredParams(verdict) {
  return Array.isArray(verdict.params) ? verdict.params : [];
}

function paramInput(param) {
  const name = `param-${param.name}`;
  const options = param.options && Array.isArray(param.options.list) ? param.options.list : null;
  if (options) {
    return h(
      "select",
      { name, required: Boolean(param.required) },
      param.required ? null : h("option", { value: "" }, "—"),
      options.map((o, i) => h("option", { value: String(i) }, o.title)),
    );
  }
  switch (param.type) {
    case "boolean":
      return h("input", { type: "checkbox", name });
    case "number":
      return h("input", {
        type: "number",
        name,
        step: "any",
        required: Boolean(param.required),
        min: param.validation && param.validation.min,
        max: param.validation && param.validation.max,
      });
    case "dateTime":
      return h("input", { type: "datetime-local", name, required: Boolean(param.required) });
    case "json":
    case "doc.ref":
    case "doc.refs":
    case "actor":
      return h("textarea", { name, rows: 2, placeholder: "JSON", required: Boolean(param.required) });
    default:
      return h("input", { type: param.type === "url" ? "url" : "text", name, required: Boolean(param.required) });
  }
}

function readParams(form, params) {
  const out = {};
  for (const param of params) {
    const input = form.elements[`param-${param.name}`];
    const options = param.options && Array.isArray(param.options.list) ? param.options.list : null;
    if (param.type === "boolean" && !options) {
      out[param.name] = input.checked;
      continue;
    }
    const raw = input.value;
    if (raw === "") continue;
    if (options) out[param.name] = options[Number(raw)].value;
    else if (param.type === "number") out[param.name] = Number(raw);
    else if (param.type === "dateTime") out[param.name] = new Date(raw).toISOString();
    else if (["json", "doc.ref", "doc.refs", "actor"].includes(param.type)) {
      try {
        out[param.name] = JSON.parse(raw);
      } catch {
        throw new GraphQLError([{ message: `${param.name} is not valid JSON`, extensions: { code: "action-params-invalid" } }]);
      }
    } else out[param.name] = raw;
  }
  return out;
}

function renderParamForm(verdict) {
  const params = declaredParams(verdict);
  const form = h(
    "form.params",
    {
      dataset: { action: `${verdict.activity}/${verdict.action}` },
      onsubmit: (event) => {
        event.preventDefault();
        let values;
        try {
          values = readParams(form, params);
        } catch (error) {
          showError(error, "params");
          return;
        }
        fire(verdict, values);
      },
    },
    h("h4", `${verdict.activity} › ${verdict.action}`),
    params.map((p) =>
      h(
        "label",
        h("span", p.title || p.name, p.required ? " *" : ""),
        paramInput(p),
        p.description ? h("small.dim", p.description) : null,
      ),
    ),
    h(
      "div.buttons",
      h("button.primary", { type: "submit" }, "Fire"),
      h("button", {
        type: "button",
        onclick: () => {
          state.selected.form = null;
          renderDetail();
        },
      }, "Cancel"),
    ),
  );
  return form;
}

function renderActions(instance, selected) {
  const verdicts = instance.availableActions || [];
  if (!verdicts.length) return h("p.dim", "no actions in this stage");
  const callable = verdicts.filter((v) => v.reason !== "cascade-fired");
  const automatic = verdicts.filter((v) => v.reason === "cascade-fired");
  const button = (v) => {
    const params = declaredParams(v);
    return h(
      "button.action",
      {
        type: "button",
        class: v.enabled ? "action enabled" : "action",
        disabled: !v.enabled || selected.busy,
        title: v.enabled ? (params.length ? "opens a form for its params" : "fire it") : v.reason || "disabled",
        dataset: { action: `${v.activity}/${v.action}`, enabled: String(v.enabled) },
        onclick: () => {
          if (params.length) {
            selected.form = `${v.activity}/${v.action}`;
            renderDetail();
          } else {
            fire(v);
          }
        },
      },
      h("span.label", h("span.activity", v.activity), " › ", h("strong", v.action), params.length ? " …" : ""),
      v.enabled ? null : h("small.reason", v.reason || "disabled"),
    );
  };
  const open = callable.find((v) => `${v.activity}/${v.action}` === selected.form);
  return h(
    "div",
    h("div.actions", callable.map(button)),
    open ? renderParamForm(open) : null,
    automatic.length
      ? h("p.dim.auto", "automatic: ", automatic.map((v) => `${v.activity} › ${v.action}`).join(", "))
      : null,
  );
}

/**
 * Graceful cancellation of the selected instance: a Cancel button while it is ACTIVE
 * (confirmed in a small form, with an optional reason), and what a cancellation did.
 */
function renderCancel(instance, selected) {
  if (instance.status === "CANCELLING") {
    return h("p.cancel-state", { dataset: { status: "cancelling" } },
      h("strong", "Cancelling"), ` since ${when(instance.cancellingAt)}`,
      instance.cancelReason ? ` · ${instance.cancelReason}` : "",
      h("span.dim", " — its cancel stage and its children's cleanup run; it turns cancelled when they end"));
  }
  if (instance.status === "CANCELLED") {
    return h("p.cancel-state", { dataset: { status: "cancelled" } },
      h("strong", "Cancelled"), ` ${when(instance.cancelledAt)}`,
      instance.cancelReason ? ` · ${instance.cancelReason}` : "");
  }
  if (instance.status !== "ACTIVE") return null;
  if (!selected.confirmCancel) {
    return h("div.lifecycle", h("button.cancel-instance", {
      type: "button",
      disabled: selected.busy,
      title: "cancelInstance: leave the stage, cancel the children, run the cancel stage (an operator's)",
      onclick: () => {
        selected.confirmCancel = true;
        renderDetail();
      },
    }, "Cancel instance…"));
  }
  const form = h(
    "form.cancel-confirm",
    {
      onsubmit: (event) => {
        event.preventDefault();
        cancelSelected(selected, form.elements.reason.value.trim() || null);
      },
    },
    h("p", "Cancel this instance? It leaves its stage, its children are asked to cancel, and its cancel " +
      "stage runs if it declares one. It cannot be resumed."),
    h("label", h("span", "Reason (optional)"), h("input", { name: "reason", autocomplete: "off" })),
    h("div.buttons",
      h("button.primary.confirm-cancel", { type: "submit", disabled: selected.busy }, "Cancel instance"),
      h("button.keep", {
        type: "button",
        onclick: () => {
          selected.confirmCancel = false;
          renderDetail();
        },
      }, "Keep running")),
  );
  return form;
}

async function cancelSelected(selected, reason) {
  selected.busy = true;
  selected.note = "cancelling…";
  renderDetail();
  try {
    const data = await client.request(Q.cancel, { id: selected.id, reason, key: freshKey() });
    const result = data.cancelInstance;
    if (state.selected === selected) {
      selected.instance = result.instance;
      selected.note = `cancel requested: ${result.instance.status.toLowerCase()}`;
    }
  } catch (error) {
    showError(error, "cancel");
    if (state.selected === selected) selected.note = `cancel refused (${error.code})`;
  } finally {
    selected.busy = false;
    selected.confirmCancel = false;
    renderDetail();
  }
}

function renderDetail() {
  const selected = state.selected;
  if (!selected) {
    fill(el.detail, h("p.placeholder", "Pick an instance or a child to see its actions."));
    return;
  }
  const instance = selected.instance;
  if (!instance) {
    fill(el.detail, selected.error ? h("p.placeholder", `Could not open ${selected.id}.`) : h("p.dim", "loading…"));
    return;
  }
  // Keep a half-filled params (or cancel) form across live redraws.
  const keep = el.detail.querySelector("form.params");
  const keepCancel = el.detail.querySelector("form.cancel-confirm");
  const isFocus = state.focus && state.focus.id === instance.id;
  fill(
    el.detail,
    h(
      "div.detail",
      { dataset: { id: instance.id, status: instance.status.toLowerCase(), stage: instance.currentStage } },
      h("h2", instance.definition, h("span.dim", ` v${instance.version}`)),
      h("div.facts",
        badge(instance.status),
        h("span.stage-name", { dataset: { stage: instance.currentStage } }, "stage ", h("strong", instance.currentStage)),
        h("span.mono.dim", instance.id)),
      parkedNotice(selected.parked, () => tickNow(selected)),
      renderCancel(instance, selected),
      h("div.nav",
        isFocus ? null : h("button", { type: "button", onclick: () => go(instance.id) }, "Show its family tree"),
        instance.parent
          ? h("button", { type: "button", onclick: () => go(instance.parent.id, instance.id) }, `Parent: ${instance.parent.definition}`)
          : null),
      h("h3", "Actions"),
      renderActions(instance, selected),
      selected.note ? h("p.note", { role: "status" }, selected.note) : null,
      h("h3", "Activities"),
      h("table.activities",
        h("tbody", (instance.activities || []).map((a) =>
          h("tr", { dataset: { activity: a.name } },
            h("td", a.name), h("td", badge(a.status)), h("td.dim", a.firedActions.join(", ")))))),
      h("h3", "Fields"),
      h("pre.fields", JSON.stringify(instance.fields, null, 2)),
      instance.pendingEffects && instance.pendingEffects.length
        ? [h("h3", "Pending effects"), h("ul", instance.pendingEffects.map((e) =>
            h("li", h("strong", e.name), ` ${e.key}`, e.claimed ? " (claimed)" : "")))]
        : null,
      h("h3", "History ", h("small.dim", "(the last 10, oldest first)")),
      h("ul.history", (instance.history || []).map((e, i) =>
        h("li", { dataset: { index: String(i), type: e.type, at: e.at } },
          h("details",
            h("summary", h("span.mono", e.type), " ", h("span.dim", when(e.at))),
            h("pre.data", JSON.stringify(e.data, null, 2)))))),
      h("p.dim", `started ${when(instance.startedAt)} · changed ${when(instance.lastChangedAt)}`),
    ),
  );
  if (keep) {
    const fresh = el.detail.querySelector(`form.params[data-action="${CSS.escape(keep.dataset.action)}"]`);
    if (fresh) fresh.replaceWith(keep);
  }
  if (keepCancel) {
    const fresh = el.detail.querySelector("form.cancel-confirm");
    if (fresh) {
      keepCancel.querySelector("button.confirm-cancel").disabled = selected.busy;
      fresh.replaceWith(keepCancel);
    }
  }
}
const scheduleDetail = coalesce(renderDetail);

// ---- token --------------------------------------------------------------

function openTokenDialog(reason) {
  fill(el.tokenReason, reason || "Enter an API token for this server.");
  el.tokenInput.value = "";
  el.tokenDialog.hidden = false;
  el.tokenInput.focus();
  renderTokenState();
}

function renderTokenState() {
  el.tokenButton.textContent = tokenStore.get() ? "Token ✓" : "Token";
}

async function useToken(token) {
  tokenStore.set(token);
  el.tokenDialog.hidden = true;
  renderTokenState();
  clearErrors();
  client.reset();
  await start();
}

// ---- parked instances ---------------------------------------------------

async function loadParked() {
  try {
    state.parked = (await client.request(PARKED_QUERY, { ids: null })).parkedInstances;
  } catch (error) {
    showError(error, "parked instances");
  }
  fill(el.parked, parkedList(state.parked, (id) => go(id)));
  el.parkedBox.hidden = state.parked.length === 0;
}

async function loadSelectedParking(selected) {
  try {
    const found = (await client.request(PARKED_QUERY, { ids: [selected.id] })).parkedInstances;
    selected.parked = found[0] || null;
  } catch (error) {
    showError(error, `parking of ${selected.id}`);
  }
  if (state.selected === selected) scheduleDetail();
}

async function tickNow(selected) {
  try {
    await client.request(TICK_MUTATION, { id: selected.id });
    selected.note = "ticked";
  } catch (error) {
    showError(error, `tick ${selected.id}`); // a tick un-parks even when it is refused again
  }
  await Promise.all([loadSelectedParking(selected), loadParked()]);
}

// ---- start --------------------------------------------------------------

async function onRoute() {
  const { focus, sel } = route();
  if (!focus) {
    forgetViews();
    return;
  }
  await Promise.all([openFocus(focus), openSelected(sel)]);
}

function forgetViews() {
  stopFocus();
  state.focus = null;
  if (state.subs.selected) state.subs.selected();
  state.subs.selected = null;
  state.selected = null;
  renderTree();
  renderDetail();
}

async function start() {
  // A new token: drop what was opened with the old one before loading again.
  forgetViews();
  try {
    await loadDefinitions();
  } catch (error) {
    showError(error, "definitions");
    return;
  }
  await runSearch();
  await loadParked();
  await onRoute();
}

function bind() {
  for (const id of ["conn", "connText", "errors", "tree", "detail", "results", "searchInfo", "more",
    "defSelect", "statusSelect", "rootsOnly", "searchForm", "openForm", "openId", "tokenButton", "tokenDialog",
    "tokenForm", "tokenInput", "tokenReason", "tokenClear", "tokenCancel", "parked", "parkedBox"]) {
    el[id] = document.getElementById(id);
  }
  el.searchForm.addEventListener("submit", (event) => {
    event.preventDefault();
    runSearch();
    loadParked();
  });
  el.more.addEventListener("click", () => runSearch(true));
  el.rootsOnly.addEventListener("change", () => runSearch());
  el.openForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const id = el.openId.value.trim();
    if (id) go(id);
  });
  el.tokenButton.addEventListener("click", () => openTokenDialog());
  el.tokenForm.addEventListener("submit", (event) => {
    event.preventDefault();
    useToken(el.tokenInput.value.trim());
  });
  el.tokenClear.addEventListener("click", () => useToken(""));
  el.tokenCancel.addEventListener("click", () => {
    el.tokenDialog.hidden = true;
  });
  window.addEventListener("hashchange", () => onRoute());
}

bind();
renderTokenState();
renderTree();
renderDetail();
start();
