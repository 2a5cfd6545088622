"use strict";
// The operator board: reads the JSON API with the token kept in sessionStorage and
// keeps the DOM in step by key, so a refresh only touches what changed.
// Its parts share the function opened below: board-columns.js, board-lease.js and
// board-task.js (which closes it) follow this file, in that order, in the page's one script
// (api/endpoints/board.py inlines them).
(() => {
  const API = location.pathname.replace(/\/board\/?$/, "") + "/api/v1";
  const TOKEN_KEY = "tenure.board.token";
  const SPACE_KEY = "tenure.board.space";
  const REFRESH_MS = 5000;
  const FOLLOW_MS = 2000;
  const TASK_PAGES = 5; // at most 500 tasks of a space per refresh, newest first
  const LOOSE_PAGES = 5; // pages of a space's leases of no task per refresh, newest first
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
    sought: null, // a lease of no task found by its id in the search box, not read otherwise
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

