// Kernel-free views (book/_ext/course_views.py). Every number comes from a table that courselib
// computed when the page was built (_static/course-views/<view>.js); this script only looks the
// current setting up and draws it. No network, no kernel.
(function () {
  "use strict";
  const TRAINING = "#009E73", HELD_IDLE = "#D55E00", FREE = "#DDDDDD"; // courselib.plots palette
  const SVG = "http://www.w3.org/2000/svg";
  const fmt2 = (v) => v.toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 });
  const money = (v) => (Array.isArray(v) ? `$${fmt2(v[0])}–$${fmt2(v[1])}` : `$${fmt2(v)}`);
  const put = (root, name, text) => { root.querySelector(`[data-out="${name}"]`).textContent = text; };
  const said = (root, name, text) => { root.querySelector(`output[data-for="${name}"]`).textContent = text; };

  function costCalculator(root, d) {
    const gpus = root.querySelector('input[name="gpus"]');
    const wait = root.querySelector('input[name="wait"]');
    const price = root.querySelector('select[name="price"]');
    function show() {
      const i = +gpus.value, j = +wait.value, k = +price.value;
      said(root, "gpus", `${d.gpus[i]}`);
      said(root, "wait", `${d.wait_min[j]} min`);
      gpus.setAttribute("aria-valuetext", `${d.gpus[i]} GPUs`);
      wait.setAttribute("aria-valuetext", `${d.wait_min[j]} minutes`);
      put(root, "gpu_hours", fmt2(d.gpu_hours[i][j]));
      put(root, "cost", money(d.cost[i][j][k]));
      put(root, "gang_gpu_hours", fmt2(d.gang_gpu_hours[i][j]));
      put(root, "gang_cost", money(d.gang_cost[i][j][k]));
      root.dataset.setting = JSON.stringify({ gpus: d.gpus[i], wait_min: d.wait_min[j], price: d.prices[k] });
    }
    gpus.addEventListener("input", show);
    wait.addEventListener("input", show);
    price.addEventListener("change", show);
    show();
  }

  function el(name, attrs, parent, text) {
    const e = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }

  function raceChart(c, total, horizon, width, at) {
    // drawn at the box's own width, so its text stays readable on a phone
    const W = Math.max(300, Math.min(900, width || 720)), left = 96, right = 12, rowH = 30, gap = 8, clusterH = 90, axisH = 28;
    const top = 6, H = top + c.jobs.length * (rowH + gap) + clusterH + axisH;
    const x = (t) => left + (Math.min(t, horizon) / horizon) * (W - left - right);
    const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, width: "100%", role: "img", "aria-label": c.verdict });
    c.jobs.forEach((job, r) => {
      const y = top + r * (rowH + gap);
      el("rect", { x: left, y, width: W - left - right, height: rowH, fill: "#F4F4F4" }, svg);
      el("text", { x: left - 8, y: y + rowH / 2 + 5, "text-anchor": "end", "font-size": 13 }, svg,
         `job ${job.name} (${job.gpus})`);
      job.segments.forEach(([t0, t1, held, training]) => {
        const h = Math.max(2, (rowH * held) / job.gpus);
        el("rect", { x: x(t0), y: y + rowH - h, width: Math.max(1, x(t1) - x(t0)), height: h,
                     fill: training ? TRAINING : HELD_IDLE }, svg);
        if (x(t1) - x(t0) > 70 && h >= 14) {
          el("text", { x: x(t0) + 6, y: y + rowH - h / 2 + 4, "font-size": 11, fill: "#FFFFFF" }, svg,
             `${held} ${training ? "training" : "held idle"}`);
        }
      });
    });
    const y0 = top + c.jobs.length * (rowH + gap);
    el("text", { x: left - 8, y: y0 + clusterH / 2 + 5, "text-anchor": "end", "font-size": 13 }, svg,
       `cluster (${total})`);
    const u = c.usage;
    for (let i = 0; i < u.t.length; i++) {
      const t0 = u.t[i], t1 = i + 1 < u.t.length ? u.t[i + 1] : horizon;
      if (t1 <= t0 || t0 >= horizon) continue;
      let y = y0 + clusterH;
      for (const [n, fill] of [[u.training[i], TRAINING], [u.idle[i], HELD_IDLE], [u.free[i], FREE]]) {
        const h = (clusterH * n) / total;
        y -= h;
        if (h > 0) el("rect", { x: x(t0), y, width: Math.max(1, x(t1) - x(t0)), height: h, fill }, svg);
      }
    }
    if (at !== undefined) {
      // the stepper's "now": a line at the event's time, what comes later veiled
      const end = x(horizon), now = x(at), bottom = y0 + clusterH;
      if (end > now) el("rect", { x: now, y: 0, width: end - now, height: bottom, fill: "#FFFFFF", "fill-opacity": 0.65, "data-veil": "" }, svg);
      el("line", { x1: now, x2: now, y1: 0, y2: bottom, stroke: "#262626", "stroke-width": 2, "data-now": at }, svg);
    }
    for (let hr = 0; hr <= horizon / 3600; hr++) {
      el("line", { x1: x(hr * 3600), x2: x(hr * 3600), y1: y0 + clusterH, y2: y0 + clusterH + 5, stroke: "#444" }, svg);
      el("text", { x: x(hr * 3600), y: y0 + clusterH + 20, "text-anchor": "middle", "font-size": 12 }, svg, `${hr} h`);
    }
    return svg;
  }

  // The stepper (reset, back, play/pause, step, a slider): it moves over a case's steps, the states
  // courselib.sim.steps computed at build time (0: before the first event), and calls redraw(k, at):
  // at is the event's time, or undefined at the last event (its state lasts to the end of the chart).
  function stepper(root, redraw) {
    const step = root.querySelector('input[name="step"]');
    const playButton = root.querySelector('button[data-step="play"]');
    let steps = [], timer = null;
    function pause() {
      if (timer !== null) clearInterval(timer);
      timer = null;
      playButton.textContent = "play";
      playButton.setAttribute("aria-pressed", "false");
    }
    function draw() {
      if (!steps.length) return; // a setting whose steps are still loading
      const k = +step.value, last = steps.length - 1, s = steps[k];
      said(root, "step", `${k} of ${last}`);
      step.setAttribute("aria-valuetext", `event ${k} of ${last}`);
      put(root, "step", s.text);
      redraw(k === last ? undefined : s.t);
      root.dataset.step = `${k}`;
    }
    function go(k) {
      if (!steps.length) return;
      step.value = `${Math.max(0, Math.min(steps.length - 1, k))}`;
      draw();
    }
    root.querySelector('button[data-step="reset"]').addEventListener("click", () => { pause(); go(0); });
    root.querySelector('button[data-step="back"]').addEventListener("click", () => { pause(); go(+step.value - 1); });
    root.querySelector('button[data-step="next"]').addEventListener("click", () => { pause(); go(+step.value + 1); });
    playButton.addEventListener("click", () => {
      if (timer !== null) { pause(); return; }
      if (+step.value === steps.length - 1) go(0);
      playButton.textContent = "pause";
      playButton.setAttribute("aria-pressed", "true");
      timer = setInterval(() => {
        if (+step.value >= steps.length - 1) pause(); else go(+step.value + 1);
      }, Math.max(40, Math.min(1000, 30000 / steps.length))); // a run of 600 binds plays in 30 s
    });
    step.addEventListener("input", () => { pause(); draw(); });
    return {
      load(newSteps) { // a new setting shows its whole run ([]: its steps are on their way)
        pause();
        steps = newSteps;
        if (!steps.length) return;
        step.max = `${steps.length - 1}`;
        go(steps.length - 1);
      },
      draw,
    };
  }

  function redrawOnResize(chart, draw) {
    let drawnAt = chart.clientWidth;
    window.addEventListener("resize", () => {
      if (Math.abs(chart.clientWidth - drawnAt) > 40) { drawnAt = chart.clientWidth; draw(); }
    });
  }

  // A setting's steps in a file of their own (book/_ext/course_views.py STEPS_APART), loaded once.
  function stepsOf(root, c) {
    if (c.steps) return Promise.resolve(c.steps);
    const name = `${root.dataset.view}/${c.steps_file}`, have = window.COURSE_VIEWS_STEPS || {};
    if (have[name]) return Promise.resolve(have[name]);
    return new Promise((resolve, reject) => {
      const s = document.createElement("script");
      s.src = root.dataset.steps + c.steps_file;
      s.onload = () => resolve(window.COURSE_VIEWS_STEPS[name]);
      s.onerror = reject;
      document.head.appendChild(s);
    });
  }

  function gangRace(root, d) {
    const nodes = root.querySelector('input[name="nodes"]');
    const delay = root.querySelector('select[name="delay"]');
    const chart = root.querySelector('[data-out="chart"]');
    let c = null, total = 0;
    const steps = stepper(root, (at) => chart.replaceChildren(raceChart(c, total, d.horizon, chart.clientWidth, at)));
    function show() {
      const policy = root.querySelector('input[name="policy"]:checked').value;
      const n = d.nodes[+nodes.value], m = +delay.value;
      const setting = JSON.stringify({ policy, nodes: n, delay_min: m });
      c = d.cases[`${policy}|${n}|${m}`];
      total = n * d.gpus_per_node;
      said(root, "nodes", `${n} nodes × ${d.gpus_per_node} = ${total} GPUs`);
      nodes.setAttribute("aria-valuetext", `${n} nodes`);
      put(root, "verdict", c.verdict);
      root.classList.toggle("course-view--deadlock", c.deadlock);
      root.dataset.setting = setting;
      chart.replaceChildren(raceChart(c, total, d.horizon, chart.clientWidth)); // the whole run, at once
      steps.load([]);
      root.dataset.loading = "true";
      const mine = c;
      return stepsOf(root, c).then((s) => {
        if (mine !== c) return; // the reader has moved on
        steps.load(s);
        delete root.dataset.loading;
      });
    }
    root.querySelectorAll('input[name="policy"]').forEach((r) => r.addEventListener("change", show));
    nodes.addEventListener("input", show);
    delay.addEventListener("change", show);
    redrawOnResize(chart, steps.draw);
    show(); // ready at once: the chart and the verdict are here; the steps follow (dataset.loading until then)
  }

  function barrierChart(d, c, width, at) {
    // ranks in each state over time, stacked (courselib.plots.barrier's colours), with a legend
    const W = Math.max(300, Math.min(900, width || 720)), left = 56, right = 12, top = 6, plotH = 150, axisH = 40;
    const used = d.states.map((_, i) => c.usage.counts.some((row) => row[i] > 0));
    const legendRows = Math.ceil(used.filter(Boolean).length / (W < 560 ? 1 : 2));
    const H = top + plotH + axisH + legendRows * 18 + 4;
    const x = (t) => left + (Math.min(t, d.horizon) / d.horizon) * (W - left - right);
    const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, width: "100%", role: "img", "aria-label": c.summary });
    el("rect", { x: left, y: top, width: W - left - right, height: plotH, fill: "#F4F4F4" }, svg);
    const u = c.usage;
    for (let i = 0; i + 1 < u.t.length; i++) {
      const t0 = u.t[i], t1 = u.t[i + 1];
      let y = top + plotH;
      u.counts[i].forEach((n, s) => {
        const h = (plotH * n) / c.ranks;
        y -= h;
        if (h > 0) el("rect", { x: x(t0), y, width: Math.max(1, x(t1) - x(t0)), height: h, fill: d.colours[s], "shape-rendering": "crispEdges", "data-state": d.states[s] }, svg);
      });
    }
    el("text", { x: left - 8, y: top + 12, "text-anchor": "end", "font-size": 12 }, svg, `${c.ranks}`);
    el("text", { x: left - 8, y: top + plotH, "text-anchor": "end", "font-size": 12 }, svg, "0");
    el("text", { x: 12, y: top + plotH / 2, "text-anchor": "middle", "font-size": 12,
                 transform: `rotate(-90 12 ${top + plotH / 2})` }, svg, "ranks");
    if (at !== undefined) {
      const end = x(d.horizon), now = x(at), bottom = top + plotH;
      if (end > now) el("rect", { x: now, y: 0, width: end - now, height: bottom, fill: "#FFFFFF", "fill-opacity": 0.65, "data-veil": "" }, svg);
      el("line", { x1: now, x2: now, y1: 0, y2: bottom, stroke: "#262626", "stroke-width": 2, "data-now": at }, svg);
    }
    const y0 = top + plotH;
    for (let hr = 0; hr <= d.horizon / 3600; hr++) {
      el("line", { x1: x(hr * 3600), x2: x(hr * 3600), y1: y0, y2: y0 + 5, stroke: "#444" }, svg);
      el("text", { x: x(hr * 3600), y: y0 + 20, "text-anchor": "middle", "font-size": 12 }, svg, `${hr} h`);
    }
    const cols = W < 560 ? 1 : 2, colW = (W - left - right) / cols;
    d.states.filter((_, i) => used[i]).forEach((s, j) => {
      const i = d.states.indexOf(s), lx = left + (j % cols) * colW, ly = y0 + axisH + Math.floor(j / cols) * 18;
      el("rect", { x: lx, y: ly - 10, width: 12, height: 12, fill: d.colours[i] }, svg);
      el("text", { x: lx + 18, y: ly, "font-size": 12 }, svg, d.labels[i]);
    });
    return svg;
  }

  function barrierView(root, d) {
    const chart = root.querySelector('[data-out="chart"]');
    let c = null;
    const steps = stepper(root, (at) => chart.replaceChildren(barrierChart(d, c, chart.clientWidth, at)));
    function show() {
      const picked = root.querySelector('input[name="case"]:checked');
      const name = picked ? picked.value : d.default;
      c = d.cases[name];
      put(root, "verdict", c.summary);
      steps.load(c.steps);
      root.dataset.setting = JSON.stringify({ case: name });
    }
    root.querySelectorAll('input[name="case"]').forEach((r) => r.addEventListener("change", show));
    show();
    redrawOnResize(chart, steps.draw);
  }

  // The topology view: per policy, the levels as nested boxes and each node's GPUs by job, at one event
  // (courselib.plots.topology's drawing and colours; the states were computed at build time).
  const JOB_COLOURS = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#F0E442", "#D55E00", "#999933"];
  function topologyChart(c, policies, t, width) {
    const W = Math.max(300, Math.min(900, width || 720)), left = 8, right = 8, rowH = 74, legendH = 26;
    const gaps = (i) => c.levels.reduce((g, lv) => g + Math.floor(i / lv[1]), 0);
    const units = c.nodes + 0.25 * gaps(c.nodes - 1) + 1;
    const u = (W - left - right) / units, x = (i) => left + u * (0.5 + i + 0.25 * gaps(i));
    const H = policies.length * rowH + legendH;
    const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, width: "100%", role: "img",
                            "aria-label": `where each pod landed at t = ${t} s under ${policies.join(", ")}` });
    const colour = {};
    c.jobs.forEach((j, i) => { colour[j] = JOB_COLOURS[i % JOB_COLOURS.length]; });
    policies.forEach((p, r) => {
      const run = c.runs[p], state = run.filter((s) => s.t <= t).pop();
      const y0 = r * rowH + 16, cellH = 30;
      const waits = state.waiting.map((w) => w[0]).join(", ");
      el("text", { x: left, y: y0 - 4, "font-size": 12, "data-policy": p }, svg,
         `${p}: ${waits ? waits + " waits" : "no job waits"}`);
      c.levels.forEach(([level, size], depth) => {
        const pad = 3 * (c.levels.length - depth);
        for (let d = 0, s0 = 0; s0 < c.nodes; d++, s0 += size) {
          const x0 = x(s0) - pad, x1 = x(s0 + size - 1) + u * 0.9 + pad;
          el("rect", { x: x0, y: y0 + 6 - pad, width: x1 - x0, height: cellH + 2 * pad, fill: "none",
                       stroke: depth === 0 ? "#333" : "#888", "stroke-dasharray": depth === 0 ? "" : "4 3",
                       "data-domain": `${level}${d}` }, svg);
        }
      });
      state.nodes.forEach((on, i) => {
        let y = y0 + 6 + cellH;
        let used = 0;
        on.forEach(([job, gpus]) => {
          const h = (cellH * gpus) / c.gpus_per_node;
          y -= h;
          used += gpus;
          el("rect", { x: x(i), y, width: u * 0.9, height: h, fill: colour[job], "data-node": i, "data-job": job }, svg);
        });
        if (used < c.gpus_per_node) {
          el("rect", { x: x(i), y: y0 + 6, width: u * 0.9, height: (cellH * (c.gpus_per_node - used)) / c.gpus_per_node,
                       fill: FREE, "data-node": i }, svg);
        }
      });
    });
    let lx = left;
    [...c.jobs, "free GPUs"].forEach((j) => {
      el("rect", { x: lx, y: H - 18, width: 12, height: 12, fill: colour[j] || FREE }, svg);
      el("text", { x: lx + 16, y: H - 8, "font-size": 12 }, svg, j);
      lx += 24 + 7 * j.length;
    });
    return svg;
  }

  function topologyView(root, d) {
    const chart = root.querySelector('[data-out="chart"]');
    const list = root.querySelector('[data-out="lines"]');
    const pick = root.querySelector('select[name="workload"]');
    const slider = root.querySelector('input[name="step"]');
    let c = null;
    function lines(t) {
      list.replaceChildren(...d.policies.map((p) => {
        const state = c.runs[p].filter((s) => s.t <= t).pop();
        const waits = state.waiting.map(([job, why]) => `${job} waits: ${why}`).join("; ") || "no job waits";
        const li = document.createElement("li");
        li.textContent = `${p}: ${state.text} | ${waits}`;
        return li;
      }));
    }
    const steps = stepper(root, () => {
      const t = c.steps[+slider.value].t;     // the last event too: its state is what the chart shows
      chart.replaceChildren(topologyChart(c, d.policies, t, chart.clientWidth));
      lines(t);
    });
    function show(k) {
      c = d.cases[pick.value];
      steps.load(c.steps);
      if (k !== undefined) { slider.value = `${k}`; steps.draw(); }
      root.dataset.setting = JSON.stringify({ workload: pick.value });
    }
    pick.addEventListener("change", () => show(Math.min(1, d.cases[pick.value].steps.length - 1)));
    show(d.default.step);
    redrawOnResize(chart, steps.draw);
  }

  const VIEWS = { "cost-calculator": costCalculator, "gang-race": gangRace, "barrier-run": barrierView,
                  "recovery-ladder": barrierView, "topology-placement": topologyView };
  function start() {
    document.querySelectorAll(".course-view[data-view]").forEach((root) => {
      const data = (window.COURSE_VIEWS || {})[root.dataset.view];
      const view = VIEWS[root.dataset.view];
      if (!data || !view) return; // the numbers printed at build time stay as they are
      Promise.resolve(view(root, data)).then(() => { root.dataset.ready = "true"; });
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
