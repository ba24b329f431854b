// tunerd's dashboard: the jobs and the farm at "/", one job's tuning curves at "/jobs/<id>".
// Everything comes from the JSON endpoints under /api/, polled while something can change.
"use strict";

const POLL_MS = 2000;
const main = document.getElementById("main");
const summary = document.getElementById("curve-summary");

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}

function gflops(x) { return x > 0 ? x.toFixed(2) : "–"; }
function when(us) { return us > 0 ? new Date(us / 1000).toLocaleString() : "–"; }
function seconds(s) {
  if (!(s >= 0)) return "–";
  if (s < 120) return s.toFixed(0) + " s";
  if (s < 7200) return (s / 60).toFixed(1) + " min";
  return (s / 3600).toFixed(1) + " h";
}

async function getJson(path) {
  const response = await fetch(path, { cache: "no-store" });
  const body = await response.json().catch(() => ({ error: response.statusText }));
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

function stamp() { document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString(); }

function progressBar(done, budget) {
  const share = budget > 0 ? Math.min(100, (100 * done) / budget) : 0;
  const bar = el("span", { class: "bar" }, el("span", { style: `width:${share}%` }));
  return el("span", {}, bar, ` ${done} / ${budget}`);
}

// A model job's figure: its estimated latency, and the untuned one once known.
function modelLatency(j) {
  const ms = (v) => v.toFixed(v < 10 ? 3 : 1);
  return `model ~${ms(j.model_ms)} ms` + (j.untuned_model_ms > 0 ? ` (untuned ${ms(j.untuned_model_ms)} ms)` : "");
}

function jobsTable(jobs) {
  const head = el("tr", {}, el("th", {}, "job"), el("th", {}, "name"), el("th", {}, "state"), el("th", {}, "trials"),
                  el("th", { class: "num" }, "best GFLOP/s (model: latency)"), el("th", {}, "device key"), el("th", {}, "tasks"),
                  el("th", {}, "created"), el("th", {}, ""));
  const table = el("table", { id: "jobs" }, head);
  for (const j of jobs) {
    table.append(el("tr", { "data-job": j.id },
      el("td", {}, el("a", { href: "/jobs/" + encodeURIComponent(j.id) }, j.id)),
      el("td", {}, j.name),
      el("td", { class: "state " + j.state }, j.state),
      el("td", {}, progressBar(j.trials_done, j.trials_budget)),
      el("td", { class: "num" }, j.model_ms > 0 ? modelLatency(j) : gflops(j.best_gflops)),
      el("td", {}, j.device_key),
      el("td", { class: "tasks", title: j.tasks.map((t) => t.workload).join("\n") },
         j.tasks.length > 1 ? `${j.tasks.length} tasks` : j.tasks.map((t) => t.workload).join(", ")),
      el("td", {}, when(j.created_at_us)),
      el("td", { class: j.error ? "error" : "muted" }, j.error || j.activity)));
  }
  if (jobs.length === 0) table.append(el("tr", {}, el("td", { colspan: 9, class: "muted" }, "No jobs yet.")));
  return table;
}

function farmTables(status) {
  const box = el("div", { id: "farm" });
  const keys = status.keys || [];
  const head = el("tr", {}, el("th", {}, "device key"), el("th", { class: "num" }, "agents"),
                  el("th", { class: "num" }, "free"), el("th", { class: "num" }, "busy"),
                  el("th", { class: "num" }, "queued candidates"), el("th", { class: "num" }, "queued batches"));
  const table = el("table", {}, head);
  for (const k of keys) {
    table.append(el("tr", { "data-key": k.device_key },
      el("td", {}, k.device_key), el("td", { class: "num" }, k.agents_total), el("td", { class: "num" }, k.agents_free),
      el("td", { class: "num" }, k.agents_busy), el("td", { class: "num" }, Number(k.pending_candidates)),
      el("td", { class: "num" }, k.pending_batches)));
  }
  if (keys.length === 0) table.append(el("tr", {}, el("td", { colspan: 6, class: "muted" }, "No agent has joined.")));
  box.append(table);
  const agents = el("table", {}, el("tr", {}, el("th", {}, "agent"), el("th", {}, "device key"), el("th", {}, "arch"),
                                    el("th", {}, "targets"), el("th", {}, "state"), el("th", { class: "num" }, "batches"),
                                    el("th", {}, "last error")));
  for (const k of keys) {
    for (const a of k.agents || []) {
      const caps = a.capabilities || {};
      agents.append(el("tr", {}, el("td", {}, a.agent_id), el("td", {}, a.device_key), el("td", {}, caps.arch || ""),
                       el("td", {}, (caps.targets || []).join(", ")), el("td", {}, a.busy ? "busy" : "free"),
                       el("td", { class: "num" }, Number(a.batches_done)), el("td", { class: "error" }, a.last_error)));
    }
  }
  box.append(el("h2", { style: "margin-top:12px" }, "Agents"), agents);
  return box;
}

async function showIndex() {
  const jobsCard = el("section", { class: "card" }, el("h2", {}, "Jobs"), el("p", { class: "muted" }, "Loading…"));
  const farmCard = el("section", { class: "card" }, el("h2", {}, "Farm"), el("p", { class: "muted" }, "Loading…"));
  main.replaceChildren(jobsCard, farmCard);
  for (;;) {
    try {
      const { jobs } = await getJson("/api/jobs");
      jobsCard.replaceChildren(el("h2", {}, "Jobs"), jobsTable(jobs));
    } catch (e) {
      jobsCard.replaceChildren(el("h2", {}, "Jobs"), el("p", { class: "error" }, e.message));
    }
    try {
      farmCard.replaceChildren(el("h2", {}, "Farm"), farmTables(await getJson("/api/devices")));
    } catch (e) {
      farmCard.replaceChildren(el("h2", {}, "Farm"), el("p", { class: "error" }, e.message));
    }
    stamp();
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

// One chart: every trial as a point, the best so far as a step line; x is the trial or the time.
function curveChart(canvas, curve, x, title) {
  const trials = curve.points.map((p) => ({ x: p[x], y: p.gflops }));
  const best = curve.points.map((p) => ({ x: p[x], y: p.best_gflops }));
  return new Chart(canvas, {
    type: "scatter",
    data: {
      datasets: [
        { label: "trial GFLOP/s", data: trials, backgroundColor: "rgba(28,100,214,0.55)", pointRadius: 3 },
        { label: "best so far", data: best, showLine: true, stepped: true, borderColor: "#1b873f",
          backgroundColor: "#1b873f", pointRadius: 0, borderWidth: 2 },
      ],
    },
    options: {
      animation: false,
      maintainAspectRatio: false,
      plugins: { title: { display: true, text: title } },
      scales: {
        x: { type: "linear", title: { display: true, text: x === "trial" ? "trial" : "seconds since the job started" } },
        y: { beginAtZero: true, title: { display: true, text: "GFLOP/s" } },
      },
    },
  });
}

function jobSummary(job) {
  const dl = el("dl", { class: "summary" });
  const add = (k, v) => dl.append(el("dt", {}, k), el("dd", {}, v));
  add("state", el("span", { class: "state " + job.state }, job.state));
  add("trials", progressBar(job.trials_done, job.trials_budget));
  add("best", el("span", { id: "job-best" }, gflops(job.best_gflops) + " GFLOP/s"));
  add("device key", job.device_key);
  add("target", job.target);
  add("elapsed", seconds(job.elapsed_s) + (job.ended ? "" : ", about " + seconds(job.eta_s) + " to go"));
  add("started", when(job.started_at_us));
  if (job.finished_at_us > 0) add("finished", when(job.finished_at_us));
  if (job.error) add("error", el("span", { class: "error" }, job.error));
  if (job.activity) add("now", job.activity);
  return dl;
}

async function showJob(id) {
  const charts = [];
  for (;;) {
    let job;
    try {
      job = await getJson("/api/jobs/" + encodeURIComponent(id) + "/curve");
    } catch (e) {
      main.replaceChildren(el("section", { class: "card" }, el("h2", {}, "Job " + id), el("p", { class: "error" }, e.message)));
      return;
    }
    charts.forEach((c) => c.destroy());
    charts.length = 0;
    const cards = [el("section", { class: "card" }, el("h2", {}, "Job " + job.id + (job.name ? " — " + job.name : "")),
                      jobSummary(job))];
    job.curves.forEach((curve, i) => {
      const head = el("h2", {}, `Task ${i + 1}: ${curve.workload}`);
      const note = el("p", { class: "muted" },
                      `${curve.points.length} trials; best trial ${gflops(curve.best_trial_gflops)} GFLOP/s` +
                      (curve.best_gflops > 0 ? `; the task's figure ${gflops(curve.best_gflops)} GFLOP/s` : ""));
      const card = el("section", { class: "card curve", id: "curve-" + i, "data-points": curve.points.length }, head, note);
      if (typeof Chart === "undefined") {
        card.append(el("p", { class: "error" }, "Chart.js did not load: install libjs-chart.js on the tunerd host."));
      } else {
        const byTrial = el("canvas", { id: `curve-${i}-trials` });
        const byTime = el("canvas", { id: `curve-${i}-time` });
        card.append(el("div", { class: "charts" }, el("div", {}, byTrial), el("div", {}, byTime)));
        cards.push(card);
        main.replaceChildren(...cards);
        charts.push(curveChart(byTrial, curve, "trial", "GFLOP/s by trial"));
        charts.push(curveChart(byTime, curve, "time_s", "GFLOP/s by time"));
        return;
      }
      cards.push(card);
    });
    main.replaceChildren(...cards);
    // What was drawn, read back from the charts themselves.
    const plotted = charts.filter((_, k) => k % 2 === 0).map((c) => c.data.datasets[0].data.length);
    const bestDrawn = charts.filter((_, k) => k % 2 === 0)
      .map((c) => c.data.datasets[1].data.reduce((m, p) => Math.max(m, p.y), 0));
    summary.dataset.job = job.id;
    summary.dataset.state = job.state;
    summary.dataset.tasks = job.curves.length;
    summary.dataset.points = job.curves.reduce((n, c) => n + c.points.length, 0);
    summary.dataset.plottedPoints = plotted.reduce((n, k) => n + k, 0);
    summary.dataset.bestTrialGflops = Math.max(0, ...bestDrawn).toFixed(3);
    summary.dataset.jobBestGflops = job.best_gflops.toFixed(3);
    summary.dataset.charts = charts.length;
    summary.dataset.ready = job.ended ? "final" : "live";
    stamp();
    if (job.ended) return;
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

const match = location.pathname.match(/^\/jobs\/([^/]+)$/);
if (match) showJob(decodeURIComponent(match[1]));
else showIndex();
