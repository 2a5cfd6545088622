  // The board's script, continued: one task's detail and actions, and the page's wiring.
  // It runs inside the function board.js opens (and board-task.js closes), using its names:
  // api/endpoints/board.py inlines board.js, board-columns.js, board-lease.js and
  // board-task.js in that order as the page's one script.
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
    let hint = "";
    if (!open && !awaiting && task.status !== "needs_attention") {
      // Only a pool of the task's own space takes it (the API refuses any other), whatever
      // spaces the board shows.
      const names = [...state.pools.values()].filter((p) => p.space === task.space).map((p) => p.name).sort();
      if (names.length) {
        const select = el("select", { id: "enqueue-pool", "aria-label": "Pool to enqueue on" });
        for (const name of names) {
          select.append(el("option", { value: name, text: `${poolName(name)} (${name})`, selected: name === task.pool }));
        }
        nodes.push(select, actionButton("enqueue", "Enqueue", () => enqueueTask(task, select.value)));
      } else hint = `${task.space} has no pool to enqueue it on.`;
    }
    box.replaceChildren(...nodes);
    why.textContent = hint || (nodes.length ? "" : "Nothing to do here: the task is finished.");
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
    if (!state.token) return; // a 401 ended the session: nothing is left to show it in
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
    searchTimer = setTimeout(() => {
      seek($("search").value);
      render();
    }, 120);
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
