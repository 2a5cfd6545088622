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
  // Pages of a space's leases of no task read a refresh, newest first: one bounded read, as
  // the board made for a space's leases before it read these apart, so watching every space
  // costs no more per refresh; the rest are named by a note and found by a search by id.
  const LOOSE_PAGES = 1;
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
  // How long a sign-in the service did not answer waits before it is tried again: longer each
  // time, then every 30 s, with the token kept.
  const SIGN_IN_RETRY_MS = [1000, 2000, 5000, 10000, 30000];

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
    session: 0, // one a token: a request asked for under an earlier one is never sent
    abort: new AbortController(), // ends the requests of this session still in flight
    signInTimer: null,
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
  // A request still waiting when its session ends is dropped unsent (see endSession).
  const IN_FLIGHT = 4;
  let flying = 0;
  const waiting = [];
  const cancelled = () => new ApiError(0, "cancelled", "Signed out: the request was not sent.");
  async function call(path, options = {}) {
    const session = state.session;
    if (flying >= IN_FLIGHT) await new Promise((go) => waiting.push(go));
    if (session !== state.session || !state.token) {
      wakeNext();
      throw cancelled();
    }
    flying++;
    try {
      return await send(path, options, session);
    } finally {
      flying--;
      wakeNext();
    }
  }

  function wakeNext() {
    if (flying >= IN_FLIGHT) return;
    const next = waiting.shift();
    if (next) next();
  }

  // Every request waiting for its turn goes at once, to find its session over and not be sent.
  function drainQueue() {
    for (const go of waiting.splice(0)) go();
  }

  async function send(path, options, session) {
    let response;
    try {
      response = await fetch(API + path, {
        ...options,
        headers: { authorization: `Bearer ${state.token}`, ...(options.headers || {}) },
        cache: "no-store",
        signal: state.abort.signal,
      });
    } catch (err) {
      if (session !== state.session) throw cancelled();
      throw new ApiError(0, "network", "The service could not be reached.");
    }
    if (response.status === 401 && session === state.session) {
      const lost = await apiError(response);
      if (session === state.session) endSession(lost.words);
      throw lost;
    }
    if (response.ok) return response;
    throw await apiError(response);
  }

  async function apiError(response) {
    let code = "http_error";
    let message = `The service answered HTTP ${response.status}.`;
    try {
      const body = await response.json();
      if (body && body.error) ({ code, message } = body.error);
      else if (body && body.message) message = body.message;
    } catch (ignored) {
      // Not the JSON envelope: the status line is all there is to say.
    }
    return new ApiError(response.status, code, message);
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

  // A token's session: what the page reads and shows while it holds that token.
  function startSession(token) {
    state.session++;
    state.abort.abort();
    state.abort = new AbortController();
    drainQueue();
    state.token = token;
  }

  // The session ends (a sign-out, or the token refused with 401): every request waiting is
  // dropped and every one in flight ended, every timer stopped and every dialog closed, and
  // the token and what it read are forgotten.
  function endSession(message) {
    startSession(null);
    state.generation++;
    clearTimeout(state.signInTimer);
    state.signInTimer = null;
    stopRefresh();
    closeDetail();
    closeTask();
    for (const id of ["lease-facts", "lease-timing", "timeline", "attachments", "logs", "lease-error"]) $(id).replaceChildren();
    for (const id of ["task-facts", "task-reasons", "task-diagnostics", "task-actions", "task-runs", "task-events"]) $(id).replaceChildren();
    sessionStorage.removeItem(TOKEN_KEY);
    state.who = null;
    state.spaces = [];
    state.read = new Map();
    state.leases = [];
    state.tasks = [];
    state.pools = new Map();
    state.sought = null;
    $("columns").replaceChildren();
    notice("");
    showLogin(message);
  }

  // Only a 401 (the token is unknown, expired or revoked) or a 403 (a token that may not use
  // the board) drops the token; a service that did not answer, or failed, is asked again with
  // the same token, a little later each time.
  async function signIn(token, tries = 0) {
    clearTimeout(state.signInTimer);
    state.signInTimer = null;
    startSession(token);
    const session = state.session;
    let who;
    let spaces;
    try {
      [who, spaces] = await Promise.all([getJson("/whoami"), readSpaces()]);
    } catch (err) {
      if (session !== state.session) return; // a 401 ended it already, or another token began
      if (err.status === 401 || err.status === 403) {
        endSession(err.words);
        return;
      }
      const wait = SIGN_IN_RETRY_MS[Math.min(tries, SIGN_IN_RETRY_MS.length - 1)];
      sessionStorage.setItem(TOKEN_KEY, token);
      showLogin(`${err.words} Signing in again in ${wait / 1000} s with the token this tab keeps.`);
      $("sign-out").hidden = false;
      state.signInTimer = setTimeout(() => signIn(token, tries + 1), wait);
      return;
    }
    if (session !== state.session) return;
    state.who = who;
    state.spaces = spaces;
    sessionStorage.setItem(TOKEN_KEY, token);
    $("login").hidden = true;
    $("space-pick").hidden = false;
    $("views").hidden = false;
    $("sign-out").hidden = false;
    const shown = $("who");
    const scope = state.who.spaces ? `spaces ${state.who.spaces.join(", ")}` : "every space";
    shown.textContent = `${state.who.role || state.who.kind} token · ${scope}`;
    shown.hidden = false;
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
    endSession("");
  }

  // A member or admin token acts on what is in its spaces; a read token on nothing.
  function canAct(space) {
    const who = state.who;
    if (!who || who.kind !== "operator" || !ACTING_ROLES.has(who.role)) return false;
    return !who.spaces || who.spaces.includes(space);
  }

