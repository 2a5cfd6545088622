"use strict";
// The operator board: reads the JSON API with the token kept in sessionStorage and
// keeps the DOM in step by key, so a refresh only touches what changed.
(() => {
  const API = location.pathname.replace(/\/board\/?$/, "") + "/api/v1";
  const TOKEN_KEY = "tenure.board.token";
  const SPACE_KEY = "tenure.board.space";
  const REFRESH_MS = 5000;
  const FOLLOW_MS = 2000;
  const TASK_PAGES = 5; // at most 500 tasks of a space per refresh, newest first
  const SPACE_PAGES = 10; // at most 1,000 spaces listed
  const COLUMN_CAP = 150; // cards drawn per column; the rest are counted, found by searching
  const COLUMNS = [
    ["ready", "Ready"],
    ["blocked", "Blocked"],
    ["queued", "Queued"],
    ["running", "Running"],
    ["needs_attention", "Needs attention"],
    ["completed", "Completed"],
    ["failed", "Failed"],
    ["cancelled", "Cancelled"],
  ];
  const COLUMN_NAMES = new Set(COLUMNS.map(([status]) => status));
  const QUEUED = new Set(["pending", "dispatching", "dispatched"]);
  const HELD = new Set(["running", "paused", "cancelling"]);
  const ENDED = new Set(["completed", "failed", "cancelled", "lost", "killed"]);
  const RETRYABLE = new Set(["failed", "lost", "killed", "cancelled"]);
  const ACTING_ROLES = new Set(["member", "admin"]);

  const $ = (id) => document.getElementById(id);
  const state = {
    token: sessionStorage.getItem(TOKEN_KEY),
    who: null,
    spaces: [], // [{key, name, archived}] the token can see
    pick: "", // the space the board is narrowed to; "" shows every space
    view: "tasks",
    read: new Map(), // space -> {tasks, loose, pools, more}: the last good read of each
    pools: new Map(),
    leases: [], // every lease on the board: the tasks' own, then those of no task
    tasks: [], // [{task, lease}] as GET /tasks lists them, newest first
    timer: null,
    generation: 0, // a refresh started for an older choice of space drops what it read
    openLease: null,
    detailTimer: null,
    followTimer: null,
    actionError: "", // what the last action on the open lease answered, until the next one
    openTask: null,
    taskTimer: null,
    taskError: "", // what the last action on the open task answered, until the next one
  };

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
    get words() {
      return this.status ? `${this.message} (${this.code}, HTTP ${this.status})` : this.message;
    }
  }

  // At most IN_FLIGHT requests at once, the rest in the order they were asked: with every
  // space read together, the first space's first page is not held up behind all the others.
  const IN_FLIGHT = 4;
  let flying = 0;
  const waiting = [];
  async function call(path, options = {}) {
    if (flying >= IN_FLIGHT) await new Promise((go) => waiting.push(go));
    flying++;
    try {
      return await send(path, options);
    } finally {
      flying--;
      const next = waiting.shift();
      if (next) next();
    }
  }

  async function send(path, options) {
    let response;
    try {
      response = await fetch(API + path, {
        ...options,
        headers: { authorization: `Bearer ${state.token}`, ...(options.headers || {}) },
        cache: "no-store",
      });
    } catch (err) {
      throw new ApiError(0, "network", "The service could not be reached; it will be retried.");
    }
    if (response.ok) return response;
    let code = "http_error";
    let message = `The service answered HTTP ${response.status}.`;
    try {
      const body = await response.json();
      if (body && body.error) ({ code, message } = body.error);
      else if (body && body.message) message = body.message;
    } catch (ignored) {
      // Not the JSON envelope: the status line is all there is to say.
    }
    throw new ApiError(response.status, code, message);
  }

  const getJson = async (path, options) => (await call(path, options)).json();
  const q = (params) => new URLSearchParams(Object.entries(params).filter(([, v]) => v != null && v !== "")).toString();

  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs)) {
      if (value == null || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children) if (child != null) node.append(child);
    return node;
  }

  function notice(text) {
    const box = $("notice");
    box.textContent = text || "";
    box.hidden = !text;
  }

  function when(iso) {
    if (!iso) return "—";
    const d = new Date(iso);
    return d.toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
  }

  // A span of time in words, to the two largest units: "45 s", "3 min 10 s", "2 h 5 min", "3 d 4 h".
  function span(seconds) {
    const s = Math.max(0, Math.floor(seconds));
    if (s < 60) return `${s} s`;
    const units = [[86400, "d"], [3600, "h"], [60, "min"], [1, "s"]];
    const parts = [];
    let left = s;
    for (const [size, name] of units) {
      if (parts.length === 0 && left < size) continue;
      const n = Math.floor(left / size);
      left -= n * size;
      parts.push(`${n} ${name}`);
      if (parts.length === 2) break;
    }
    return parts.filter((p) => !p.startsWith("0 ")).join(" ") || parts[0];
  }

  const since = (iso) => (iso ? (Date.now() - Date.parse(iso)) / 1000 : null);
  const firstLine = (text) => String(text || "").split(/\r?\n/).find((l) => l.trim()) || "";

  // ------------------------------------------------------------------ signing in

  function showLogin(message) {
    stopRefresh();
    $("login").hidden = false;
    for (const id of ["board", "filters", "workers-view", "pools-view", "space-pick", "views", "who", "sign-out"]) $(id).hidden = true;
    const error = $("login-error");
    error.textContent = message || "";
    error.hidden = !message;
    $("token-input").focus();
  }

  async function signIn(token) {
    state.token = token;
    try {
      const [who, spaces] = await Promise.all([getJson("/whoami"), readSpaces()]);
      state.who = who;
      state.spaces = spaces;
    } catch (err) {
      sessionStorage.removeItem(TOKEN_KEY);
      state.token = null;
      showLogin(err.words);
      return;
    }
    sessionStorage.setItem(TOKEN_KEY, token);
    $("login").hidden = true;
    $("space-pick").hidden = false;
    $("views").hidden = false;
    $("sign-out").hidden = false;
    const who = $("who");
    const scope = state.who.spaces ? `spaces ${state.who.spaces.join(", ")}` : "every space";
    who.textContent = `${state.who.role || state.who.kind} token · ${scope}`;
    who.hidden = false;
    fillSpacePicker();
    const fromHash = new URLSearchParams(location.hash.slice(1));
    const chosen = fromHash.has("space") ? fromHash.get("space") : sessionStorage.getItem(SPACE_KEY) || "";
    const view = fromHash.get("view");
    if (view === "workers" || view === "pools") state.view = view;
    chooseSpace(chosen);
  }

  // Every space the token can see, a page of 100 at a time.
  async function readSpaces() {
    const found = [];
    let cursor = null;
    for (let page = 0; page < SPACE_PAGES; page++) {
      const body = await getJson("/spaces?" + q({ limit: 100, cursor }));
      found.push(...body.spaces);
      cursor = body.next_cursor;
      if (!cursor) break;
    }
    return found;
  }

  function fillSpacePicker() {
    const select = $("space-picker");
    select.replaceChildren(
      el("option", { value: "", text: `every space (${state.spaces.length})` }),
      ...state.spaces.map((s) =>
        el("option", { value: s.key, text: `${s.key} · ${s.name}${s.archived ? " (archived)" : ""}` }),
      ),
    );
  }

  function signOut() {
    sessionStorage.removeItem(TOKEN_KEY);
    state.token = null;
    state.who = null;
    $("columns").replaceChildren();
    showLogin("");
  }

  // A member or admin token acts on what is in its spaces; a read token on nothing.
  function canAct(space) {
    const who = state.who;
    if (!who || who.kind !== "operator" || !ACTING_ROLES.has(who.role)) return false;
    return !who.spaces || who.spaces.includes(space);
  }

  // ------------------------------------------------------------------ the board

  function shownSpaces() {
    return state.pick ? [state.pick] : state.spaces.map((s) => s.key);
  }

  function chooseSpace(space) {
    state.pick = (space || "").trim();
    state.generation++;
    state.read = new Map();
    state.leases = [];
    state.tasks = [];
    state.pools = new Map();
    sessionStorage.setItem(SPACE_KEY, state.pick);
    writeHash();
    const picker = $("space-picker");
    if (state.pick && ![...picker.options].some((o) => o.value === state.pick)) {
      picker.append(el("option", { value: state.pick, text: state.pick }));
    }
    picker.value = state.pick;
    buildColumns();
    showView(state.view);
    refresh();
  }

  function writeHash() {
    const params = {};
    if (state.pick) params.space = state.pick;
    if (state.view !== "tasks") params.view = state.view;
    history.replaceState(null, "", "#" + q(params));
  }

  function showView(view) {
    state.view = view;
    for (const button of document.querySelectorAll("#views button")) {
      button.setAttribute("aria-pressed", String(button.dataset.view === view));
    }
    $("board").hidden = view !== "tasks";
    $("filters").hidden = view !== "tasks";
    $("workers-view").hidden = view !== "workers";
    $("pools-view").hidden = view !== "pools";
    writeHash();
  }

  function buildColumns() {
    const columns = $("columns");
    columns.replaceChildren(
      ...COLUMNS.map(([status, title]) =>
        el(
          "section",
          { class: "column", "data-status": status, "aria-labelledby": `col-${status}` },
          el("h2", { id: `col-${status}` }, el("span", { text: title }), el("span", { class: "count", text: "0" })),
          el("ol", { "aria-labelledby": `col-${status}` }),
          el("p", { class: "empty", text: "Nothing here." }),
          el("p", { class: "more", hidden: true }),
        ),
      ),
    );
  }

  function stopRefresh() {
    clearTimeout(state.timer);
    state.timer = null;
  }

  async function refresh() {
    stopRefresh();
    const generation = state.generation;
    const spaces = shownSpaces();
    const problems = [];
    // Each space is read on its own and drawn as soon as it has been read.
    await Promise.all(
      spaces.map(async (space) => {
        try {
          // A space not drawn yet is drawn from its first page of tasks on; one on the board
          // already is redrawn once every page is in, so no card drops out in between.
          const first = !state.read.has(space);
          // Drawn once its pools (their display names) and a page of its tasks are in.
          let partial = null;
          let known = null;
          const early = () => {
            if (!first || !partial || !known || generation !== state.generation) return;
            state.read.set(space, { tasks: partial, more: false, loose: [], pools: known });
            gather();
            scheduleRender();
          };
          // The space's first page of tasks and its pools are asked for before its other
          // reads, so every space's first page is ahead of those in the queue of requests.
          let firstPage;
          const paged = new Promise((go) => (firstPage = go));
          const reading = readTasks(space, (tasks) => {
            partial = tasks;
            early();
            firstPage();
          }, first);
          reading.catch(() => firstPage());
          const pooled = getJson("/pools?" + q({ space })).then((body) => {
            known = body.pools;
            early();
            return body;
          });
          pooled.catch(() => null);
          await paged;
          const [tasks, loose, pools] = await Promise.all([
            reading,
            getJson("/leases?" + q({ space, limit: 100 })),
            pooled,
          ]);
          if (generation !== state.generation) return;
          state.read.set(space, { tasks: tasks.tasks, more: tasks.more, loose: loose.leases, pools: pools.pools });
          gather();
          scheduleRender();
        } catch (err) {
          problems.push([space, err]);
        }
      }),
    );
    if (generation !== state.generation) return;
    const lost = problems.find(([, err]) => err.status === 401);
    if (lost) {
      sessionStorage.removeItem(TOKEN_KEY);
      showLogin(lost[1].words);
      return;
    }
    if (!spaces.length) notice("This token sees no space yet: an admin creates one with POST /spaces.");
    else if (problems.length) {
      notice(problems.map(([space, err]) => `The board could not be refreshed for ${space}: ${err.words}`).join(" "));
    } else notice("");
    gather();
    render();
    if (state.view === "workers") loadWorkers();
    if (state.view === "pools") loadPools();
    $("updated").textContent = `Updated ${new Date().toISOString().slice(11, 19)} UTC · ${spaces.length} space${spaces.length === 1 ? "" : "s"} · refreshes every ${REFRESH_MS / 1000} s`;
    if (state.token && !document.hidden) state.timer = setTimeout(refresh, REFRESH_MS);
  }

  // What every read space holds, merged: tasks newest first, the pools by name.
  function gather() {
    const tasks = [];
    const untasked = [];
    const pools = new Map();
    const cut = [];
    for (const [space, got] of state.read) {
      tasks.push(...got.tasks);
      // Rule-minted leases of a workflow or the space have no task: each is a card of its own.
      untasked.push(...got.loose.filter((lease) => !lease.task));
      for (const p of got.pools) pools.set(p.name, p);
      if (got.more) cut.push(space);
    }
    tasks.sort((a, b) => (b.task.created_at || "").localeCompare(a.task.created_at || ""));
    state.tasks = tasks;
    state.pools = pools;
    state.leases = [...tasks.map((t) => t.lease).filter(Boolean), ...untasked];
    $("truncated").hidden = !cut.length;
    $("truncated").textContent = cut.length
      ? `Showing the newest ${TASK_PAGES * 100} tasks of ${cut.join(", ")}; older ones are not on the board.`
      : "";
    fillPoolFilter();
  }

  let renderQueued = false;
  function scheduleRender() {
    if (renderQueued) return;
    renderQueued = true;
    requestAnimationFrame(() => {
      renderQueued = false;
      render();
    });
  }

  // One request a page: each task with its open (or newest) lease, and the status a read of it
  // derives, blocked reasons included.
  // A space read for the first time starts with a short page, drawn sooner.
  const FIRST_PAGE = 25;
  async function readTasks(space, onPage, short) {
    const found = [];
    let cursor = null;
    const most = TASK_PAGES * 100;
    for (let page = 0; page <= TASK_PAGES && found.length < most; page++) {
      const limit = short && page === 0 ? FIRST_PAGE : Math.min(100, most - found.length);
      const body = await getJson("/tasks?" + q({ space, limit, cursor }));
      found.push(...body.tasks);
      if (onPage) onPage([...found]);
      cursor = body.next_cursor;
      if (!cursor) return { tasks: found, more: false };
    }
    return { tasks: found, more: true };
  }

  function derivedStatus(lease) {
    if (QUEUED.has(lease.state)) return "queued";
    if (HELD.has(lease.state)) return "running";
    if (lease.state === "completed") return "completed";
    if (lease.state === "failed" || lease.state === "lost") return "failed";
    return "cancelled";
  }

  function taskKey(id) {
    const found = state.tasks.find((t) => t.task.id === id);
    return found ? found.task.key : id;
  }

  // A blocked reason in words: what the task waits for.
  function reasonText(reason) {
    if (reason.source === "dependency") {
      const keys = (reason.depends_on_task_ids || []).map(taskKey);
      return `waits on ${keys.join(", ") || "its dependencies"}`;
    }
    if (reason.source === "paused") {
      return reason.paused_by_task_id === undefined ? "paused" : `paused by ${taskKey(reason.paused_by_task_id)}`;
    }
    if (reason.source === "approval") return "awaiting approval";
    return `${reason.kind || "blocked"}: ${reason.reason || ""}`.trim();
  }

  const awaitingApproval = (task) => Boolean(task && (task.blocked_reasons || []).some((r) => r.source === "approval"));

  function poolName(name) {
    const pool = state.pools.get(name);
    return (pool && pool.display_name) || name;
  }

  function chipOf(lease, task) {
    if (!lease) {
      if (awaitingApproval(task)) return { kind: "approval", text: "awaiting approval", state: task.status };
      const blocked = task.status === "blocked";
      return { kind: "task", text: blocked ? "blocked" : "no lease yet", state: task.status };
    }
    const qc = lease.queued_condition;
    if (qc) {
      return {
        kind: "condition",
        text: `${poolName(lease.pool)} (${qc.label})`,
        condition: qc.code,
        needsPerson: qc.needs_person,
      };
    }
    if (HELD.has(lease.state)) return { kind: "state", text: lease.state, state: lease.state };
    return { kind: "ended", text: lease.state, state: lease.state };
  }

  function chipNode(chip) {
    if (chip.kind === "condition") {
      const needs = chip.needsPerson ? "true" : "false";
      const mark = chip.needsPerson
        ? el("span", { class: "dot", "aria-hidden": "true" })
        : el("span", { class: "spin", "aria-hidden": "true" });
      return el(
        "span",
        { class: "chip", "data-condition": chip.condition, "data-needs-person": needs },
        mark,
        el("span", { class: "label", text: chip.text }),
      );
    }
    const cls = { state: "chip", task: "chip task", approval: "chip approval" }[chip.kind] || "chip ended";
    return el(
      "span",
      { class: cls, "data-state": chip.state },
      el("span", { class: chip.kind === "approval" ? "dot" : "bar", "aria-hidden": "true" }),
      el("span", { class: "label", text: chip.text }),
    );
  }

  // How long the card has been where it is: queued for, running for, ended ago; a task with
  // no lease, how long since it was filed.
  function ageOf(lease, task) {
    if (!lease) {
      const s = since(task.created_at);
      const waiting = awaitingApproval(task) ? "awaiting approval for" : "filed";
      return s == null ? null : { seconds: s, text: waiting === "filed" ? `filed ${span(s)} ago` : `${waiting} ${span(s)}` };
    }
    const t = lease.timing || {};
    if (QUEUED.has(lease.state)) {
      const from = t.not_before && Date.parse(t.not_before) > Date.parse(t.created_at) ? t.not_before : t.created_at;
      const s = since(from);
      if (s != null && s < 0) return { seconds: s, text: `starts in ${span(-s)}` };
      return s == null ? null : { seconds: s, text: `queued for ${span(s)}` };
    }
    if (HELD.has(lease.state)) {
      const s = since(t.started_at || t.claimed_at);
      return s == null ? null : { seconds: s, text: `${lease.state === "running" ? "running" : lease.state} for ${span(s)}` };
    }
    const s = since(t.ended_at);
    return s == null ? null : { seconds: s, text: `ended ${span(s)} ago` };
  }

  // What the search box finds: a task's key or id, a lease's id, or every word in its title.
  function matcher(text) {
    const wanted = text.trim().toLowerCase();
    if (!wanted) return null;
    const words = wanted.split(/\s+/);
    return (card) => {
      if (card.ids.some((id) => id && id.toLowerCase() === wanted)) return true;
      const title = (card.title || "").toLowerCase();
      return words.every((w) => title.includes(w) || (card.ref || "").toLowerCase() === w);
    };
  }

  function cards() {
    const poolFilter = $("pool-filter").value;
    const stateFilter = $("state-filter").value;
    const [ageOp, ageLimit] = ($("age-filter").value || ":").split(":");
    const search = matcher($("search").value);
    const out = [];
    const shown = (lease, pool, task) => {
      if (poolFilter && pool !== poolFilter) return false;
      if (!stateFilter) return true;
      const qc = lease && lease.queued_condition;
      if (stateFilter === "needs_person") return needsPerson(lease, task);
      if (stateFilter === "waiting") return Boolean(qc && !qc.needs_person);
      if (stateFilter === "approval") return awaitingApproval(task);
      return Boolean(lease) && lease.state === stateFilter;
    };
    const aged = (age) => {
      if (!ageOp) return true;
      if (!age) return false;
      return ageOp === "lt" ? age.seconds < Number(ageLimit) : age.seconds > Number(ageLimit);
    };
    const keep = (card) => aged(card.age) && (!search || search(card));
    for (const { task, lease } of state.tasks) {
      if (!shown(lease, lease ? lease.pool : task.pool, task)) continue;
      const reasons = (task.blocked_reasons || []).map(reasonText);
      const card = {
        key: task.id,
        space: task.space,
        lease,
        status: COLUMN_NAMES.has(task.status) ? task.status : lease ? derivedStatus(lease) : "ready",
        ref: task.key,
        ids: [task.id, task.key, lease && lease.id],
        title: task.title,
        chip: chipOf(lease, task),
        error: lease && lease.state === "failed" ? firstLine(lease.error) : "",
        approval: awaitingApproval(task),
        needsPerson: needsPerson(lease, task),
        age: ageOf(lease, task),
        meta: lease
          ? [`${poolName(lease.pool)} · attempt ${lease.attempt}`, ...reasons].join(" · ")
          : reasons.join(" · ") || (task.pool ? `enqueues on ${poolName(task.pool)}` : "not enqueued"),
      };
      if (keep(card)) out.push(card);
    }
    for (const lease of state.leases) {
      if (lease.task || !shown(lease, lease.pool)) continue;
      const card = {
        key: lease.id,
        space: lease.space,
        lease,
        status: derivedStatus(lease),
        ref: lease.subject_kind,
        ids: [lease.id],
        title: lease.subject_kind === "workflow" ? `Workflow ${lease.workflow ? lease.workflow.slug : ""}` : `Space ${lease.space}`,
        chip: chipOf(lease),
        error: lease.state === "failed" ? firstLine(lease.error) : "",
        approval: false,
        needsPerson: needsPerson(lease),
        age: ageOf(lease),
        meta: `${poolName(lease.pool)} · attempt ${lease.attempt}`,
      };
      if (keep(card)) out.push(card);
    }
    return out;
  }

  // One notion of "needs a person" for the header's count, the state filter and the order in
  // a column: a task in the Needs attention column, a task awaiting approval, and a queued run
  // held by what only a person clears (a paused pool, an archived space…).
  function needsPerson(lease, task) {
    if (task && (task.status === "needs_attention" || awaitingApproval(task))) return true;
    return Boolean(lease && lease.queued_condition && lease.queued_condition.needs_person);
  }

  function render() {
    const wanted = cards();
    const byColumn = new Map(COLUMNS.map(([s]) => [s, []]));
    for (const card of wanted) (byColumn.get(card.status) || byColumn.get("cancelled")).push(card);
    // What needs a person leads its column; otherwise newest first, as the API lists them.
    for (const list of byColumn.values()) list.sort((a, b) => Number(b.needsPerson) - Number(a.needsPerson));
    const drawn = new Set();
    for (const list of byColumn.values()) for (const card of list.slice(0, COLUMN_CAP)) drawn.add(card.key);
    for (const node of document.querySelectorAll("#columns .card")) {
      if (!drawn.has(node.dataset.key)) node.parentElement.remove();
    }
    let needs = 0;
    let waiting = 0;
    let held = 0;
    for (const [status, list] of byColumn) {
      const column = document.querySelector(`.column[data-status="${status}"]`);
      const ol = column.querySelector("ol");
      let before = ol.firstElementChild;
      for (const card of list.slice(0, COLUMN_CAP)) {
        const item = placeCard(card);
        if (item !== before) ol.insertBefore(item, before);
        else before = before.nextElementSibling;
      }
      for (const card of list) {
        const qc = card.lease && card.lease.queued_condition;
        if (card.needsPerson) needs++;
        else if (qc) waiting++;
        else if (card.lease && HELD.has(card.lease.state)) held++;
      }
      column.querySelector(".count").textContent = String(list.length);
      column.querySelector(".empty").hidden = list.length > 0;
      const more = column.querySelector(".more");
      more.hidden = list.length <= COLUMN_CAP;
      more.textContent = list.length > COLUMN_CAP ? `${list.length - COLUMN_CAP} more: search or filter to find them.` : "";
    }
    const parts = [];
    const attention = byColumn.get("needs_attention").length;
    parts.push(`${needs} need${needs === 1 ? "s" : ""} a person (${attention} in Needs attention)`);
    parts.push(`${waiting} waiting on their own`);
    parts.push(`${held} held by workers`);
    const summary = $("summary");
    const text = parts.join(" · ");
    if (summary.textContent !== text) summary.textContent = text;
  }

  // The card's <li>, made once per key; only what changed is written, so focus stays put.
  function placeCard(card) {
    const leaseId = card.lease ? card.lease.id : "";
    const signature = JSON.stringify([card.ref, card.title, card.chip, card.meta, card.error, leaseId]);
    let button = document.querySelector(`#columns .card[data-key="${CSS.escape(card.key)}"]`);
    if (!button) {
      button = el("button", { type: "button", class: "card", "data-key": card.key });
      // Every card opens: a lease's card its lease, a task without one the task view.
      button.addEventListener("click", () => {
        if (button.dataset.lease) openDetail(button.dataset.lease);
        else openTask(button.dataset.task);
      });
      el("li", {}, button);
    }
    if (card.lease) {
      button.dataset.lease = leaseId;
      button.dataset.state = card.lease.state;
    } else {
      delete button.dataset.lease;
      delete button.dataset.state;
    }
    button.dataset.task = card.key;
    button.dataset.space = card.space;
    if (card.approval) button.dataset.approval = "true";
    else delete button.dataset.approval;
    button.setAttribute("aria-disabled", "false");
    if (button.dataset.signature !== signature) {
      button.dataset.signature = signature;
      const parts = [
        el("span", { class: "key", text: card.ref }),
        el("span", { class: "title", text: card.title }),
        chipNode(card.chip),
        card.error ? el("span", { class: "error-line", text: card.error }) : null,
        el("span", { class: "meta", text: card.meta }),
        el("span", { class: "age" }),
      ];
      button.replaceChildren(...parts.filter(Boolean));
      const action = card.lease ? "Open the lease." : "No lease yet. Open the task.";
      const more = card.lease ? "" : ` ${card.meta}.`;
      const error = card.error ? ` Error: ${card.error}.` : "";
      button.setAttribute("aria-label", `${card.ref}: ${card.title}. ${card.chip.text}.${error}${more} ${action}`);
    }
    const age = button.querySelector(".age");
    const ageText = card.age ? card.age.text : "";
    if (age.textContent !== ageText) age.textContent = ageText;
    return button.parentElement;
  }

  function fillPoolFilter() {
    const select = $("pool-filter");
    const names = [...state.pools.keys()].sort();
    const have = [...select.options].slice(1).map((o) => o.value);
    if (have.join("\n") === names.join("\n")) return;
    const value = select.value;
    select.replaceChildren(
      el("option", { value: "", text: "every pool" }),
      ...names.map((n) => el("option", { value: n, text: state.pick ? poolName(n) : `${poolName(n)} (${state.pools.get(n).space})` })),
    );
    select.value = names.includes(value) ? value : "";
  }

  // Arrow keys move between cards: up and down in a column, left and right across columns.
  function onBoardKey(event) {
    const card = event.target.closest && event.target.closest(".card");
    if (!card) return;
    const columns = [...document.querySelectorAll("#columns .column")];
    const column = card.closest(".column");
    const inColumn = [...column.querySelectorAll(".card")];
    const at = inColumn.indexOf(card);
    let target = null;
    if (event.key === "ArrowDown") target = inColumn[at + 1];
    else if (event.key === "ArrowUp") target = inColumn[at - 1];
    else if (event.key === "Home") target = inColumn[0];
    else if (event.key === "End") target = inColumn[inColumn.length - 1];
    else if (event.key === "ArrowRight" || event.key === "ArrowLeft") {
      const step = event.key === "ArrowRight" ? 1 : -1;
      for (let i = columns.indexOf(column) + step; i >= 0 && i < columns.length; i += step) {
        const others = [...columns[i].querySelectorAll(".card")];
        if (others.length) {
          target = others[Math.min(at, others.length - 1)];
          break;
        }
      }
    } else return;
    event.preventDefault();
    if (target) target.focus();
  }

  // ------------------------------------------------------------------ workers and pools

  function tableRows(tbody, rows) {
    tbody.replaceChildren(
      ...rows.map((cells) =>
        el("tr", cells.attrs || {}, ...cells.map((c) => (c instanceof Node ? el("td", {}, c) : el("td", { text: c == null ? "—" : String(c) })))),
      ),
    );
  }

  function shownPools() {
    return [...state.pools.values()].sort((a, b) => a.space.localeCompare(b.space) || a.name.localeCompare(b.name));
  }

  let workersBusy = false;
  async function loadWorkers() {
    if (workersBusy) return;
    workersBusy = true;
    const generation = state.generation;
    const pools = shownPools();
    const problems = [];
    const found = [];
    await Promise.all(
      pools.map(async (pool) => {
        try {
          const body = await getJson("/workers?" + q({ pool: pool.name }));
          for (const w of body.workers) found.push({ ...w, pool: pool.name });
        } catch (err) {
          problems.push(`${pool.name}: ${err.words}`);
        }
      }),
    );
    workersBusy = false;
    if (generation !== state.generation) return;
    found.sort((a, b) => a.pool.localeCompare(b.pool) || a.worker_id.localeCompare(b.worker_id));
    const rows = found.map((w) => {
      const status = el("span", { class: "chip status", "data-status": w.status }, el("span", { class: "label", text: w.status }));
      const seen = since(w.last_seen);
      const held = w.leases.length ? `${w.leases.length}: ${w.leases.map((l) => `${l.id} (${l.state}, fence ${l.fence})`).join(", ")}` : "0";
      const cells = [w.worker_id, `${poolName(w.pool)} (${w.pool})`, status, seen == null ? "never" : `${span(seen)} ago`, w.worker_version || "—", held];
      cells.attrs = { "data-worker": w.worker_id, "data-pool": w.pool };
      return cells;
    });
    tableRows($("workers-table").querySelector("tbody"), rows);
    const words = `${found.length} worker${found.length === 1 ? "" : "s"} in ${pools.length} pool${pools.length === 1 ? "" : "s"}.`;
    $("workers-note").textContent = problems.length ? `${words} Not read: ${problems.join("; ")}` : words;
  }

  let poolsBusy = false;
  async function loadPools() {
    if (poolsBusy) return;
    poolsBusy = true;
    const generation = state.generation;
    const pools = shownPools();
    const problems = [];
    const figures = new Map();
    await Promise.all(
      pools.map(async (pool) => {
        try {
          figures.set(pool.name, (await getJson(`/pools/${encodeURIComponent(pool.name)}/figures`)).figures);
        } catch (err) {
          problems.push(`${pool.name}: ${err.words}`);
        }
      }),
    );
    poolsBusy = false;
    if (generation !== state.generation) return;
    const atLeast = (n, capped) => (n == null ? "—" : capped ? `${n}+` : String(n));
    const rows = pools.map((pool) => {
      const f = figures.get(pool.name);
      const hour = (f && f.last_hour) || {};
      const ceilings = [
        `active ${pool.max_active == null ? "no limit" : pool.max_active}`,
        pool.max_active_per_key != null ? `per key ${pool.max_active_per_key}` : null,
        pool.max_claims_per_minute != null ? `${pool.max_claims_per_minute}/min` : null,
      ].filter(Boolean).join(" · ");
      const hold = f && f.mass_expiry_hold ? `held until ${when(f.mass_expiry_hold.until)}` : "none";
      const cells = [
        `${poolName(pool.name)} (${pool.name})`,
        pool.space,
        f ? atLeast(f.queued, f.queued_capped) : "—",
        f ? atLeast(f.held, f.held_capped) : "—",
        f && f.oldest_queued_age_seconds != null ? span(f.oldest_queued_age_seconds) : "—",
        f ? atLeast(hour.claims, hour.capped) : "—",
        f ? atLeast(hour.completed, hour.capped) : "—",
        f ? atLeast(hour.failed, hour.capped) : "—",
        pool.paused ? "paused" : "no",
        ceilings,
        hold,
      ];
      cells.attrs = { "data-pool": pool.name, "data-hold": f && f.mass_expiry_hold ? "true" : "false" };
      return cells;
    });
    tableRows($("pools-table").querySelector("tbody"), rows);
    const words = `${pools.length} pool${pools.length === 1 ? "" : "s"}; the last hour's figures are read from the leases that ended or are held now.`;
    $("pools-note").textContent = problems.length ? `${words} Not read: ${problems.join("; ")}` : words;
  }

  // ------------------------------------------------------------------ one lease

  async function openDetail(leaseId) {
    state.openLease = leaseId;
    state.actionError = "";
    const dialog = $("detail");
    $("detail-title").textContent = `Lease ${leaseId}`;
    $("detail-error").hidden = true;
    for (const id of ["lease-facts", "lease-timing", "timeline", "attachments"]) $(id).replaceChildren();
    $("logs").textContent = "Loading…";
    $("log-follow").checked = false;
    const listed = state.leases.find((l) => l.id === leaseId);
    if (listed) showLease(listed);
    if (!dialog.open) dialog.showModal();
    await loadDetail(true);
  }

  function closeDetail() {
    state.openLease = null;
    clearTimeout(state.detailTimer);
    clearTimeout(state.followTimer);
    const dialog = $("detail");
    if (dialog.open) dialog.close();
  }

  function detailError(text) {
    const box = $("detail-error");
    box.textContent = text || "";
    box.hidden = !text;
  }

  async function loadDetail(everything) {
    clearTimeout(state.detailTimer);
    const id = state.openLease;
    if (!id) return;
    const problems = [];
    let lease = null;
    try {
      lease = await getJson(`/leases/${encodeURIComponent(id)}`);
      if (state.openLease !== id) return;
      showLease(lease);
      showOpenTask(lease);
    } catch (err) {
      problems.push(`The lease could not be read: ${err.words}`);
    }
    if (lease) {
      const jobs = [loadTimeline(lease).catch((err) => problems.push(`The timeline could not be read: ${err.words}`))];
      if (everything) {
        jobs.push(loadLogs().catch(() => null));
        jobs.push(loadAttachments().catch((err) => problems.push(`The attachments could not be read: ${err.words}`)));
      }
      await Promise.all(jobs);
    }
    if (state.openLease !== id) return;
    detailError([state.actionError, ...problems].filter(Boolean).join(" "));
    state.detailTimer = setTimeout(() => loadDetail(false), REFRESH_MS);
  }

  function facts(target, rows) {
    const nodes = [];
    for (const [name, value] of rows) nodes.push(el("dt", { text: name }), el("dd", {}, value));
    target.replaceChildren(...nodes);
  }

  function showLease(lease) {
    const chip = chipNode(chipOf(lease));
    const subject = lease.task ? `task ${lease.task.key}` : lease.workflow ? `workflow ${lease.workflow.slug}` : `space ${lease.space}`;
    facts($("lease-facts"), [
      ["State", chip],
      ["Subject", subject],
      ["Pool", `${poolName(lease.pool)} (${lease.pool})`],
      ["Attempt", String(lease.attempt)],
      ["Fence", String(lease.fence)],
      ["Priority", String(lease.priority ?? 5)],
      ["Run timeout", lease.max_run_seconds ? `${lease.max_run_seconds} s` : "none"],
      ["Worker", lease.worker_id ? `${lease.worker_id}${lease.worker_version ? " · version " + lease.worker_version : ""}` : "not claimed yet"],
      ["Outcome", lease.end_reason ? `${lease.outcome || lease.state} (${lease.end_reason})` : "—"],
    ]);
    const t = lease.timing || {};
    facts($("lease-timing"), [
      ["Created", when(t.created_at)],
      ["Not before", when(t.not_before)],
      ["Claimed", when(t.claimed_at)],
      ["Started", when(t.started_at)],
      ["Last heartbeat", when(t.last_heartbeat_at)],
      ["Deadline", when(t.deadline)],
      ["Queue timeout", when(t.queue_expires_at)],
      ["Run deadline", when(t.run_deadline)],
      ["Ended", when(t.ended_at)],
    ]);
    showError(lease);
    showRetry(lease);
    const button = $("cancel-lease");
    const why = $("cancel-why");
    if (!canAct(lease.space)) {
      button.disabled = true;
      why.textContent = "Cancelling needs a member token.";
    } else if (ENDED.has(lease.state)) {
      button.disabled = true;
      why.textContent = `The lease has ended (${lease.state}).`;
    } else if (lease.state === "cancelling") {
      button.disabled = true;
      why.textContent = "Cancelling: the worker has been asked to stop.";
    } else {
      button.disabled = false;
      why.textContent =
        lease.state === "pending" || lease.state === "dispatching"
          ? "A queued lease is cancelled at once."
          : "The lease moves to cancelling: its worker will be asked to stop.";
    }
  }

  // The error's last lines, and the stderr tail the worker sent with the failure when it did.
  const ERROR_LINES = 30;
  function showError(lease, stderrTail) {
    const section = $("error-section");
    const text = lease.error || (lease.state === "lost" || lease.state === "killed" ? `${lease.state}: ${lease.end_reason || "no reason recorded"}` : "");
    if (!text && !stderrTail) {
      section.hidden = true;
      return;
    }
    const lines = String(text).split(/\r?\n/);
    const shown = lines.slice(-ERROR_LINES).join("\n");
    const parts = [lines.length > ERROR_LINES ? `(the first ${lines.length - ERROR_LINES} lines left out)\n${shown}` : shown];
    if (stderrTail) parts.push(`\nstderr, last lines:\n${String(stderrTail).split(/\r?\n/).slice(-ERROR_LINES).join("\n")}`);
    const pre = $("lease-error");
    const joined = parts.join("\n");
    if (pre.textContent !== joined) pre.textContent = joined;
    section.hidden = false;
  }

  function showRetry(lease) {
    const button = $("retry-lease");
    const why = $("retry-why");
    const applies = Boolean(lease.task) && RETRYABLE.has(lease.state);
    button.hidden = !applies || !canAct(lease.space);
    button.disabled = false;
    why.textContent = applies && !canAct(lease.space) ? "Retrying needs a member token." : "";
  }

  async function retryLease() {
    const id = state.openLease;
    if (!id || !window.confirm(`Retry lease ${id}? A new run of its task is queued.`)) return;
    const button = $("retry-lease");
    button.disabled = true;
    try {
      const body = await getJson(`/leases/${encodeURIComponent(id)}/retry`, { method: "POST" });
      state.actionError = "";
      detailError("");
      refresh();
      openDetail(body.lease.id);
    } catch (err) {
      state.actionError = `The lease could not be retried: ${err.words}`;
      detailError(state.actionError);
      button.disabled = false;
    }
  }

  function showOpenTask(lease) {
    const open = $("open-task");
    open.hidden = !lease.task;
    open.dataset.task = lease.task ? lease.task.id : "";
  }

  async function loadTimeline(lease) {
    let path;
    if (lease.task) path = `/tasks/${encodeURIComponent(lease.task.id)}/activity`;
    else if (lease.workflow) path = `/workflows/${encodeURIComponent(lease.workflow.slug)}/activity?` + q({ space: lease.space });
    else path = `/spaces/${encodeURIComponent(lease.space)}/activity`;
    const body = await getJson(path);
    const failed = body.events.find((ev) => ev.lease_id === lease.id && ev.type === "lease.failed");
    const tail = failed && failed.data && failed.data.metadata && failed.data.metadata.stderr_tail;
    if (state.openLease === lease.id && tail) showError(lease, tail);
    const items = body.events.map((ev) =>
      el("li", { class: ev.lease_id === lease.id ? "mine" : null },
        el("time", { datetime: ev.at, text: when(ev.at) }), ` ${ev.type}` + (ev.fence != null ? ` (fence ${ev.fence})` : "")));
    if (!items.length) items.push(el("li", { text: "No events yet." }));
    $("timeline").replaceChildren(...items);
  }

  async function loadLogs() {
    clearTimeout(state.followTimer);
    const id = state.openLease;
    if (!id) return;
    const pre = $("logs");
    try {
      const body = await getJson(`/leases/${encodeURIComponent(id)}/logs?` + q({ tail: $("log-tail").value }));
      if (state.openLease !== id) return;
      const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
      const lines = body.events.map((ev) =>
        el("span", { class: ev.stream }, `${ev.timestamp} ${ev.container}/${ev.stream} ${ev.message}\n`));
      if (!lines.length) lines.push("No log lines yet.");
      if (body.truncated) lines.unshift(`(older lines left out: showing the last ${body.events.length})\n`);
      pre.replaceChildren(...lines);
      if ($("log-follow").checked || atEnd) pre.scrollTop = pre.scrollHeight;
    } catch (err) {
      pre.textContent = err.code === "unsupported_runtime" ? `No logs: ${err.words}` : `The logs could not be read: ${err.words}`;
    }
    if ($("log-follow").checked && state.openLease === id) state.followTimer = setTimeout(loadLogs, FOLLOW_MS);
  }

  async function loadAttachments() {
    const id = state.openLease;
    const body = await getJson(`/leases/${encodeURIComponent(id)}/attachments`);
    if (state.openLease !== id) return;
    const items = body.attachments.map((a) => {
      const button = el("button", { type: "button", class: "quiet", text: `Download ${a.filename}` });
      button.addEventListener("click", () => download(id, a));
      return el("li", {}, button, ` ${a.kind} · ${a.content_type} · ${a.byte_size} bytes · ${when(a.created_at)}`);
    });
    if (!items.length) items.push(el("li", { text: "No attachments." }));
    $("attachments").replaceChildren(...items);
  }

  // The API wants the bearer token, which a plain link cannot send: fetch, then save the blob.
  async function download(leaseId, attachment) {
    try {
      const response = await call(`/leases/${encodeURIComponent(leaseId)}/attachments/${encodeURIComponent(attachment.id)}`);
      const url = URL.createObjectURL(await response.blob());
      const link = el("a", { href: url, download: attachment.filename });
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
    } catch (err) {
      state.actionError = `${attachment.filename} could not be downloaded: ${err.words}`;
      detailError(state.actionError);
    }
  }

  async function cancelLease() {
    const id = state.openLease;
    if (!id || !window.confirm(`Cancel lease ${id}?`)) return;
    const button = $("cancel-lease");
    button.disabled = true;
    try {
      const body = await getJson(`/leases/${encodeURIComponent(id)}/cancel`, { method: "POST" });
      state.actionError = "";
      showLease(body.lease);
      detailError("");
      refresh();
    } catch (err) {
      state.actionError = `The lease could not be cancelled: ${err.words}`;
      detailError(state.actionError);
      button.disabled = false;
    }
  }


  // ------------------------------------------------------------------ one task

  const NEXT_ACTION_WORDS = {
    claim_available: "A worker can claim it now.",
    waiting_for_session: "Waiting: no worker has taken it yet, or something holds it back.",
    stranded: "Stranded: its holder went silent, or no reachable worker can take it.",
    running: "Running: a worker holds it and has been heard from.",
    recovery_required: "A person is needed: recover it, or retry its last run.",
    terminal: "Finished: nothing more will run unless a person enqueues it again.",
  };
  const DONE = new Set(["completed", "cancelled"]);

  function reasonWords(reason) {
    if (reason.source === "approval") return `awaiting approval since ${when(reason.requested_at)}`;
    return reasonText(reason);
  }

  async function openTask(taskId) {
    if (!taskId) return;
    closeDetail();
    state.openTask = taskId;
    state.taskError = "";
    $("task-title").textContent = `Task ${taskKey(taskId)}`;
    for (const id of ["task-facts", "task-reasons", "task-diagnostics", "task-actions", "task-runs", "task-events"]) $(id).replaceChildren();
    $("task-next").textContent = "Loading…";
    taskErrorBox("");
    const dialog = $("task-detail");
    if (!dialog.open) dialog.showModal();
    await loadTask();
  }

  function closeTask() {
    state.openTask = null;
    clearTimeout(state.taskTimer);
    const dialog = $("task-detail");
    if (dialog.open) dialog.close();
  }

  function taskErrorBox(text) {
    const box = $("task-error");
    box.textContent = text || "";
    box.hidden = !text;
  }

  async function loadTask() {
    clearTimeout(state.taskTimer);
    const id = state.openTask;
    if (!id) return;
    let problem = "";
    try {
      const path = encodeURIComponent(id);
      const [got, shot] = await Promise.all([getJson(`/tasks/${path}`), getJson(`/inspect/${path}`)]);
      if (state.openTask !== id) return;
      showTask(got.task, got.lease, shot);
    } catch (err) {
      problem = `The task could not be read: ${err.words}`;
    }
    if (state.openTask !== id) return;
    taskErrorBox([state.taskError, problem].filter(Boolean).join(" "));
    state.taskTimer = setTimeout(loadTask, REFRESH_MS);
  }

  function showTask(task, lease, shot) {
    $("task-title").textContent = `Task ${task.key}: ${task.title}`;
    facts($("task-facts"), [
      ["Status", el("span", { class: "chip task", "data-state": task.status }, el("span", { class: "label", text: task.status }))],
      ["Pool", task.pool ? `${poolName(task.pool)} (${task.pool})` : "—"],
      ["Open lease", lease ? `${lease.id} (${lease.state})` : "none"],
      ["Attempts allowed", String(task.max_attempts)],
    ]);
    const reasons = task.blocked_reasons || [];
    $("task-reasons").replaceChildren(
      ...(reasons.length
        ? reasons.map((r) =>
            el("span", { class: "chip reason", "data-source": r.source }, el("span", { class: "label", text: reasonWords(r) })),
          )
        : [el("span", { class: "hint", text: "Nothing blocks it." })]),
    );
    $("task-next").textContent = NEXT_ACTION_WORDS[shot.next_action] || shot.next_action;
    $("task-next").dataset.nextAction = shot.next_action;
    const sched = shot.scheduler || {};
    const held = [];
    held.push(sched.paused ? "The scheduler is paused: no claims anywhere." : "The scheduler hands out claims.");
    if (sched.effective_paused) held.push(`Paused by ${taskKey(sched.paused_by_task_id)}.`);
    if (sched.parked) held.push("Parked until a person recovers it.");
    $("task-scheduler").textContent = held.join(" ");
    const diagnostics = shot.diagnostics || [];
    $("task-diagnostics").replaceChildren(
      ...(diagnostics.length
        ? diagnostics.map((d) => el("li", { "data-code": d.code }, el("strong", { text: d.code }), ` ${d.message}`))
        : [el("li", { text: "No problems found." })]),
    );
    const runs = shot.recent_leases || [];
    $("task-runs").replaceChildren(
      ...(runs.length
        ? runs.map((l) => {
            const item = el("li", {}, el("time", { datetime: l.timing.created_at, text: when(l.timing.created_at) }), ` ${l.id} · ${l.state} · attempt ${l.attempt}`);
            item.addEventListener("click", () => openDetail(l.id));
            return item;
          })
        : [el("li", { text: "No runs yet." })]),
    );
    const events = shot.recent_events || [];
    $("task-events").replaceChildren(
      ...(events.length
        ? events.map((ev) => el("li", {}, el("time", { datetime: ev.at, text: when(ev.at) }), ` ${ev.type}`))
        : [el("li", { text: "No events yet." })]),
    );
    showTaskActions(task, lease);
  }

  function actionButton(name, text, handler, danger) {
    const button = el("button", { type: "button", class: danger ? "danger" : null, "data-action": name, text });
    button.addEventListener("click", handler);
    return button;
  }

  function showTaskActions(task, lease) {
    const box = $("task-actions");
    const why = $("task-actions-why");
    if (!canAct(task.space)) {
      box.replaceChildren();
      why.textContent = "Acting on a task needs a member token.";
      return;
    }
    const key = task.key;
    const awaiting = (task.blocked_reasons || []).some((r) => r.source === "approval");
    const open = lease && !ENDED.has(lease.state);
    const nodes = [];
    if (awaiting) {
      nodes.push(actionButton("approve", "Approve", () => taskAction(task, "approve", `Approve ${key}?`, false)));
      nodes.push(actionButton("reject", "Reject", () => taskAction(task, "reject", `Reject ${key}: why? (required)`, true), true));
    }
    if (task.status === "needs_attention") {
      nodes.push(actionButton("recover", "Recover", () => taskAction(task, "recover", `Recover ${key}: why is it safe to go on? (required)`, true)));
    }
    if (!DONE.has(task.status)) {
      if (task.paused) nodes.push(actionButton("resume", "Resume", () => taskAction(task, "resume", `Resume ${key} and its descendants?`, false)));
      else nodes.push(actionButton("pause", "Pause", () => taskAction(task, "pause", `Pause ${key} and its descendants?`, false)));
      nodes.push(actionButton("cancel", "Cancel task", () => cancelTask(task), true));
    }
    if (!open && !awaiting && task.status !== "needs_attention") {
      const select = el("select", { id: "enqueue-pool", "aria-label": "Pool to enqueue on" });
      for (const name of [...state.pools.keys()].sort()) {
        select.append(el("option", { value: name, text: `${poolName(name)} (${name})`, selected: name === task.pool }));
      }
      nodes.push(select, actionButton("enqueue", "Enqueue", () => enqueueTask(task, select.value)));
    }
    box.replaceChildren(...nodes);
    why.textContent = nodes.length ? "" : "Nothing to do here: the task is finished.";
  }

  // Each action is confirmed first; a note the API requires is asked for in the same step.
  async function taskAction(task, action, question, needsNote) {
    let body = {};
    if (needsNote) {
      const note = window.prompt(question, "");
      if (note == null) return;
      body = { note };
    } else if (action === "approve") {
      const note = window.prompt(`${question} (a note is optional)`, "");
      if (note == null) return;
      if (note.trim()) body = { note };
    } else if (!window.confirm(question)) {
      return;
    }
    await sendTaskAction(task, action, `/tasks/${encodeURIComponent(task.id)}/${action}`, body);
  }

  // The reason is required; the task alone is cancelled (the CLI and API take `subtree`).
  async function cancelTask(task) {
    const reason = window.prompt(`Cancel ${task.key}: it will never run again. Why? (required)`, "");
    if (reason == null) return;
    await sendTaskAction(task, "cancel", `/tasks/${encodeURIComponent(task.id)}/cancel`, { reason, subtree: false });
  }

  async function enqueueTask(task, pool) {
    if (!pool || !window.confirm(`Enqueue ${task.key} on ${poolName(pool)}?`)) return;
    await sendTaskAction(task, "enqueue", `/tasks/${encodeURIComponent(task.id)}/enqueue`, { pool });
  }

  async function sendTaskAction(task, action, path, body) {
    for (const button of $("task-actions").querySelectorAll("button")) button.disabled = true;
    try {
      await getJson(path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
      state.taskError = "";
    } catch (err) {
      state.taskError = `${task.key} could not be ${PAST[action] || action}: ${err.words}`;
    }
    taskErrorBox(state.taskError);
    refresh();
    await loadTask();
  }

  const PAST = {
    approve: "approved",
    reject: "rejected",
    recover: "recovered",
    pause: "paused",
    resume: "resumed",
    enqueue: "enqueued",
    cancel: "cancelled",
  };

  // ------------------------------------------------------------------ wiring

  $("login").addEventListener("submit", (event) => {
    event.preventDefault();
    const token = $("token-input").value.trim();
    $("token-input").value = "";
    if (token) signIn(token);
  });
  $("space-picker").addEventListener("change", () => chooseSpace($("space-picker").value));
  for (const button of document.querySelectorAll("#views button")) {
    button.addEventListener("click", () => {
      showView(button.dataset.view);
      if (state.view === "workers") loadWorkers();
      if (state.view === "pools") loadPools();
    });
  }
  let searchTimer = null;
  $("search").addEventListener("input", () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(render, 120);
  });
  $("pool-filter").addEventListener("change", render);
  $("state-filter").addEventListener("change", render);
  $("age-filter").addEventListener("change", render);
  $("sign-out").addEventListener("click", signOut);
  $("columns").addEventListener("keydown", onBoardKey);
  $("detail-close").addEventListener("click", closeDetail);
  $("detail").addEventListener("close", closeDetail);
  $("cancel-lease").addEventListener("click", cancelLease);
  $("retry-lease").addEventListener("click", retryLease);
  $("open-task").addEventListener("click", () => openTask($("open-task").dataset.task));
  $("task-close").addEventListener("click", closeTask);
  $("task-detail").addEventListener("close", closeTask);
  $("log-follow").addEventListener("change", loadLogs);
  $("log-tail").addEventListener("change", loadLogs);

  // A hidden tab stops reading the API; it catches up at once when it is looked at again.
  document.addEventListener("visibilitychange", () => {
    if (!document.hidden && state.who && state.token && !state.timer) refresh();
  });

  if (state.token) signIn(state.token);
  else showLogin("");
})();
