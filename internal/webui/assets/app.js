// p2pc web view: renders the sections the server streams (server-sent
// events, "update": a JSON object of the sections that changed).
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const el = (tag, cls, text) => { const e = document.createElement(tag); if (cls) e.className = cls; if (text !== undefined) e.textContent = text; return e; };
  const state = { page: 0, rows: 50, filter: "all", lastTasks: 0, tasksTimer: null, hasJob: false, ended: false, es: null, jobState: "" };
  const finalStates = { complete: true, failed: true, interrupted: true };

  function fmtDur(s) {
    if (s < 0 || !isFinite(s)) return "–";
    s = Math.round(s);
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
    return h ? h + "h" + String(m).padStart(2, "0") + "m" : m ? m + "m" + String(r).padStart(2, "0") + "s" : r + "s";
  }
  const fmtRate = (r) => r >= 100 ? r.toFixed(0) : r >= 10 ? r.toFixed(1) : r.toFixed(2);
  const fmtBytes = (b) => b >= 1 << 30 ? (b / (1 << 30)).toFixed(1) + " GiB" : (b / (1 << 20)).toFixed(1) + " MiB";
  const short = (id) => id ? id.slice(0, 13) : "";

  function renderJob(j) {
    $("job-view").hidden = false; $("tasks-view").hidden = false; state.hasJob = true;
    for (const k of ["done", "failed", "running", "queued", "total"]) $("count-" + k).textContent = j[k];
    $("rate").textContent = fmtRate(j.rate);
    $("eta").textContent = j.state === "running" ? fmtDur(j.eta) : "–";
    $("job-state").textContent = j.state;
    const pct = (n) => (j.total ? 100 * n / j.total : 0) + "%";
    $("bar-done").style.width = pct(j.done); $("bar-failed").style.width = pct(j.failed); $("bar-running").style.width = pct(j.running);
    $("job-error").hidden = !j.error; $("job-error").textContent = j.error || "";
    document.title = "p2pc: " + j.done + "/" + j.total + " " + (j.name || "");
    state.jobState = j.state;
    if (finalStates[j.state]) end();
    scheduleTasks();
  }

  // end: the job is over (its final state is shown); nothing more will
  // come, so the page stops listening and offers no action.
  function end() {
    if (state.ended) return;
    state.ended = true;
    if (state.es) state.es.close();
    const c = $("conn");
    c.textContent = state.jobState ? "ended: " + state.jobState : "ended"; c.className = "conn ended " + (state.jobState || "");
    $("cancel").hidden = true; $("act-note").textContent = "";
    if (state.hasJob) { // the table's final state, at once: the server waits for it a moment only
      if (state.tasksTimer) { clearTimeout(state.tasksTimer); state.tasksTimer = null; }
      loadTasks();
    }
  }

  function renderSeries(pts) {
    const svg = $("chart"), W = 800, H = 160, P = 18;
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    const rates = [];
    for (let i = 1; i < pts.length; i++) {
      const dt = (pts[i].t - pts[i - 1].t) / 1000;
      if (dt > 0) rates.push({ t: pts[i].t, r: (pts[i].n - pts[i - 1].n) / dt });
    }
    const ns = "http://www.w3.org/2000/svg";
    const text = (x, y, s, anchor) => { const t = document.createElementNS(ns, "text"); t.setAttribute("x", x); t.setAttribute("y", y); if (anchor) t.setAttribute("text-anchor", anchor); t.textContent = s; svg.appendChild(t); };
    if (rates.length < 2) { text(W / 2, H / 2, "waiting for data", "middle"); return; }
    const t0 = rates[0].t, t1 = rates[rates.length - 1].t, maxR = Math.max(...rates.map((p) => p.r), 0.001);
    const x = (t) => P + (W - 2 * P) * (t - t0) / Math.max(t1 - t0, 1), y = (r) => H - P - (H - 2 * P) * r / maxR;
    const d = rates.map((p, i) => (i ? "L" : "M") + x(p.t).toFixed(1) + "," + y(p.r).toFixed(1)).join("");
    const area = document.createElementNS(ns, "path");
    area.setAttribute("d", d + "L" + x(t1).toFixed(1) + "," + (H - P) + "L" + x(t0).toFixed(1) + "," + (H - P) + "Z");
    area.setAttribute("class", "area"); svg.appendChild(area);
    const line = document.createElementNS(ns, "path"); line.setAttribute("d", d); line.setAttribute("class", "line"); svg.appendChild(line);
    text(P, 12, fmtRate(maxR) + " tasks/s");
    text(W - P, H - 4, fmtDur((t1 - t0) / 1000) + " shown", "end");
  }

  function renderPeers(peers) {
    const tb = $("peers").tBodies[0];
    tb.textContent = "";
    for (const p of peers) {
      const tr = el("tr"); tr.dataset.state = p.state; tr.dataset.name = p.name;
      const name = el("td", "", p.name + (p.self ? " (this node)" : ""));
      tr.append(name, el("td", "mono", short(p.id)), el("td", "", p.os ? p.os + "/" + p.arch : "–"),
        el("td", "", (p.used >= 0 ? p.used : "?") + "/" + p.slots), el("td", "", p.gpus || "–"), el("td", "", p.done), el("td", "", fmtRate(p.rate) + "/s"));
      const st = el("td"); const badge = el("span", "state " + p.state, p.state); st.append(badge);
      if (p.note) { st.title = p.note; st.append(el("div", "muted", p.note.slice(0, 120))); }
      tr.append(st, el("td", "", p.confinement || "–"));
      tb.append(tr);
    }
    $("peer-count").textContent = "(" + peers.length + " peer" + (peers.length === 1 ? "" : "s") + ")";
  }

  function renderJobs(js) {
    $("jobs-view").hidden = false;
    const tb = $("jobs").tBodies[0]; tb.textContent = "";
    if (!js.length) { const tr = el("tr"); const td = el("td", "muted", "no job yet"); td.colSpan = 10; tr.append(td); tb.append(tr); }
    for (const j of js) {
      const tr = el("tr"); tr.dataset.job = j.id; tr.dataset.state = j.serving ? "serving" : "ended";
      const name = el("td"); name.append(el("div", "", j.name || "–"), el("div", "mono muted", short(j.id)));
      const sub = el("td"); sub.append(el("div", "", j.submitter || "–"), el("div", "mono muted", short(j.submitter_id)));
      const st = el("td"); st.append(el("span", "state " + (j.serving ? "working" : "idle"), j.serving ? "serving" : "ended"));
      tr.append(name, sub, st, el("td", "num running", j.running), el("td", "num queued", j.queued), el("td", "num done", j.done),
        el("td", "num failed", j.failed), el("td", "num rate", fmtRate(j.rate) + "/s"),
        el("td", "num cpu", Math.round(100 * j.cpu) + "%"), el("td", "num mem", fmtBytes(j.memory)));
      tb.append(tr);
    }
  }

  function renderStages(ss) {
    $("stages-view").hidden = false;
    const tb = $("stages").tBodies[0]; tb.textContent = "";
    for (const s of ss) {
      const tr = el("tr"); tr.dataset.stage = s.name; tr.dataset.state = s.state;
      const st = el("td"); st.append(el("span", "state " + (s.state === "running" ? "working" : "idle"), s.state));
      tr.append(el("td", "name", s.name), el("td", "needs muted", (s.needs || []).join(", ") || "–"), st,
        el("td", "num running", s.running), el("td", "num queued", s.queued), el("td", "num done", s.done),
        el("td", "num failed", s.failed), el("td", "num blocked", s.blocked), el("td", "num total", s.total));
      tb.append(tr);
    }
  }

  function renderFailures(fs) {
    const box = $("failures"); box.textContent = "";
    if (!fs.length) { box.append(el("p", "muted", "none")); return; }
    for (const f of fs) {
      const it = el("div", "item" + (f.final ? " final" : ""));
      it.append(el("div", "meta", "task " + f.task + " on " + f.peer + ": " + f.outcome + (f.final ? " (failed for good)" : " (retried)")));
      it.append(el("pre", "stderr", f.error));
      box.append(it);
    }
  }

  function renderPartials(ps) {
    const box = $("partials"); box.textContent = "";
    if (!ps.length) { box.append(el("p", "muted", "none yet")); return; }
    for (const p of ps) {
      const it = el("div", "item partial");
      it.append(el("div", "meta", "task " + p.task + " on " + p.peer + ", " + new Date(p.time).toLocaleTimeString()));
      if (p.png) { const img = el("img"); img.src = p.png; img.alt = "partial result of task " + p.task; it.append(img); }
      else it.append(el("pre", "", p.text));
      box.append(it);
    }
  }

  // The task table is fetched page by page, at most once a second.
  function scheduleTasks() {
    if (state.tasksTimer) return;
    const wait = Math.max(0, 1000 - (Date.now() - state.lastTasks));
    state.tasksTimer = setTimeout(loadTasks, wait);
  }
  async function loadTasks() {
    state.tasksTimer = null; state.lastTasks = Date.now();
    const q = "/api/tasks?state=" + state.filter + "&offset=" + state.page * state.rows + "&limit=" + state.rows;
    let pg;
    try {
      const r = await fetch(q);
      if (!r.ok) { if (r.status === 503) scheduleTasks(); return; } // the table could not be read now: ask again
      pg = await r.json();
    } catch (e) { return; }
    const tb = $("tasks").tBodies[0]; tb.textContent = "";
    for (const t of pg.rows) {
      const tr = el("tr"); tr.dataset.state = t.state;
      const st = el("td"); st.append(el("span", "state " + t.state, t.state === "pending" ? "queued" : t.state));
      const note = el("td");
      if (t.error) note.append(el("span", "err", t.error.slice(-160)));
      for (const png of t.pngs || []) {
        const a = el("a", "", png); a.href = "/api/file?task=" + encodeURIComponent(t.id) + "&name=" + encodeURIComponent(png); a.target = "_blank"; note.append(" ", a);
      }
      const peer = el("td", "peer", t.on && t.on.length ? t.on.join(", ") : t.peer || "");
      if (t.on && t.on.length > 1) { peer.append(el("div", "muted", t.on.length + " copies: the first, then replicas or backups")); }
      tr.append(el("td", "mono", t.id), st, peer, el("td", "", t.attempts),
        el("td", "", t.duration ? t.duration.toFixed(3) + "s" : ""), el("td", "mono", (t.digest || "").slice(0, 12)),
        el("td", "", t.votes || ""), note);
      tb.append(tr);
    }
    const pages = Math.max(1, Math.ceil(pg.total / state.rows));
    $("page-info").textContent = "page " + (state.page + 1) + " of " + pages + " (" + pg.total + " tasks)";
    $("prev").disabled = state.page === 0; $("next").disabled = state.page + 1 >= pages;
  }

  const render = { job: renderJob, series: renderSeries, peers: renderPeers, failures: renderFailures, partials: renderPartials,
    jobs: renderJobs, stages: renderStages, title: (t) => { $("title").textContent = t; } };

  function apply(secs) {
    for (const k in secs) if (render[k]) render[k](secs[k]);
    // Running tasks move between peers without the counts changing.
    if (state.hasJob && secs.peers) scheduleTasks();
    if (secs.end) end();
  }

  // The first paint comes from the snapshot: the whole current state,
  // the task table included, before any event.
  async function first() {
    try {
      const r = await fetch("/api/snapshot");
      if (r.ok && !state.ended) apply(await r.json());
    } catch (e) { /* the events say whether the view is reachable */ }
  }

  function connect() {
    const es = new EventSource("/api/events");
    state.es = es;
    es.addEventListener("update", (ev) => {
      if (state.ended) return;
      $("conn").textContent = "live"; $("conn").className = "conn live";
      apply(JSON.parse(ev.data));
    });
    es.onerror = () => { if (!state.ended) { $("conn").textContent = "reconnecting"; $("conn").className = "conn"; } };
  }

  async function access() {
    try {
      const r = await fetch("/api/access"); const a = await r.json();
      if (a.cancel && !state.ended) {
        $("cancel").hidden = false;
        if (!a.act) { $("cancel").disabled = true; $("act-note").textContent = "open the URL p2pc printed (with its token) to act"; }
      }
    } catch (e) { /* the events say whether the view is reachable */ }
  }

  $("cancel").addEventListener("click", async () => {
    if (!confirm("Cancel the job? Tasks that are done stay done; running them again resumes.")) return;
    const r = await fetch("/api/cancel", { method: "POST", headers: { "X-P2PC-UI": "1" } });
    $("act-note").textContent = r.ok ? "cancelling…" : "cancel refused: " + r.status;
  });
  $("task-state").addEventListener("change", (e) => { state.filter = e.target.value; state.page = 0; loadTasks(); });
  $("prev").addEventListener("click", () => { if (state.page > 0) { state.page--; loadTasks(); } });
  $("next").addEventListener("click", () => { state.page++; loadTasks(); });
  access();
  first();
  connect();
})();
