  // The board's script, continued: the workers' and pools' tables, and one lease's detail.
  // It runs inside the function board.js opens (and board-task.js closes), using its names:
  // api/endpoints/board.py inlines board.js, board-columns.js, board-lease.js and
  // board-task.js in that order as the page's one script.
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
      if (state.openLease !== id) return;
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
      if (state.openLease !== id) return; // closed meanwhile, or the session ended
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
      if (state.openLease !== leaseId) return;
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
      if (state.openLease !== id) return;
      state.actionError = `The lease could not be cancelled: ${err.words}`;
      detailError(state.actionError);
      button.disabled = false;
    }
  }


