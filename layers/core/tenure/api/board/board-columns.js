  // The board's script, continued: the columns of cards, their refresh and search.
  // It runs inside the function board.js opens (and board-task.js closes), using its names:
  // api/endpoints/board.py inlines board.js, board-columns.js, board-lease.js and
  // board-task.js in that order as the page's one script.
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
    state.sought = null;
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
    if (!state.token || !state.who) return; // no session: nothing to read it with
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
            state.read.set(space, { tasks: partial, more: false, loose: [], looseMore: false, pools: known });
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
          const [tasks, loose, pools] = await Promise.all([reading, readLoose(space), pooled]);
          if (generation !== state.generation) return;
          state.read.set(space, {
            tasks: tasks.tasks,
            more: tasks.more,
            loose: loose.leases,
            looseMore: loose.more,
            pools: pools.pools,
          });
          gather();
          scheduleRender();
        } catch (err) {
          problems.push([space, err]);
        }
      }),
    );
    // A 401 has ended the session already (send): nothing read for it is drawn.
    if (generation !== state.generation) return;
    if (!spaces.length) notice("This token sees no space yet: an admin creates one with POST /spaces.");
    else if (problems.length) {
      const said = problems.map(([space, err]) => `The board could not be refreshed for ${space}: ${err.words}`);
      notice(`${said.join(" ")} It reads again in ${REFRESH_MS / 1000} s.`);
    } else notice("");
    await seekAgain();
    if (generation !== state.generation) return;
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
    const looseCut = [];
    for (const [space, got] of state.read) {
      tasks.push(...got.tasks);
      // Rule-minted leases of a workflow or the space have no task: each is a card of its own.
      untasked.push(...got.loose.filter((lease) => !lease.task));
      for (const p of got.pools) pools.set(p.name, p);
      if (got.more) cut.push(space);
      if (got.looseMore) looseCut.push(space);
    }
    const sought = state.sought;
    if (sought && state.read.has(sought.space) && !untasked.some((l) => l.id === sought.id)) untasked.push(sought);
    tasks.sort((a, b) => (b.task.created_at || "").localeCompare(a.task.created_at || ""));
    state.tasks = tasks;
    state.pools = pools;
    state.leases = [...tasks.map((t) => t.lease).filter(Boolean), ...untasked];
    const notes = [];
    if (cut.length) notes.push(`Showing the newest ${TASK_PAGES * 100} tasks of ${cut.join(", ")}; older ones are not on the board.`);
    if (looseCut.length) {
      notes.push(
        `Some leases of no task (a workflow's or a space's) of ${looseCut.join(", ")} are not on the board, nor in its counts: ` +
          `it reads the newest of them each refresh (${LOOSE_PAGES === 1 ? "one page" : `${LOOSE_PAGES} pages`}). Search by a lease's id to find one, ` +
          "or list them with GET /leases?space=…&subject_kind=workflow,space.",
      );
    }
    $("truncated").hidden = !notes.length;
    $("truncated").textContent = notes.join(" ");
    fillPoolFilter();
  }

  // A space's leases of no task (a rule's, for a workflow or the space), newest first: the API
  // reads them apart from the leases tasks were filed with, so no number of newer tasks hides
  // them; each page is one bounded read, and at most LOOSE_PAGES pages are read a refresh.
  async function readLoose(space) {
    const found = [];
    let cursor = null;
    for (let page = 0; page < LOOSE_PAGES; page++) {
      const body = await getJson("/leases?" + q({ space, subject_kind: "workflow,space", limit: 100, cursor }));
      found.push(...body.leases);
      cursor = body.next_cursor;
      if (!cursor) return { leases: found, more: false };
    }
    return { leases: found, more: true };
  }

  // A lease id typed whole into the search box that no card carries: the lease is read by its
  // id and, when it has no task and is of a space on the board, drawn as its card for as long
  // as the search asks for it (read again at each refresh).
  const LEASE_ID = /^lease_[0-9a-z]+$/i;
  async function seek(text) {
    const id = text.trim();
    if (state.sought && state.sought.id !== id) {
      state.sought = null;
      gather();
    }
    if (!LEASE_ID.test(id) || state.sought || state.leases.some((l) => l.id === id)) return;
    const generation = state.generation;
    let lease;
    try {
      lease = await getJson(`/leases/${encodeURIComponent(id)}`);
    } catch (err) {
      return; // not a lease this token may read: the search finds nothing
    }
    if (generation !== state.generation || $("search").value.trim() !== id) return;
    if (lease.task || !state.read.has(lease.space)) return;
    state.sought = lease;
    gather();
    render();
  }

  async function seekAgain() {
    const sought = state.sought;
    if (!sought) return;
    try {
      const lease = await getJson(`/leases/${encodeURIComponent(sought.id)}`);
      if (state.sought === sought) state.sought = lease;
    } catch (err) {
      if (state.sought === sought && err.status) state.sought = null;
    }
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

