// metabonk watch: the page (vanilla JS, no dependencies). Read-only: it only GETs and listens.
"use strict";
const TOKEN = new URLSearchParams(location.search).get("token");
const q = (p) => TOKEN ? p + (p.includes("?") ? "&" : "?") + "token=" + encodeURIComponent(TOKEN) : p;
// files of the watched directory: no token in their URLs (the cookie set with the page carries
// it); a page among them is served sandboxed, in an origin of its own (docs/trust.md)
const fileUrl = (p) => "/files/" + p.split("/").map(encodeURIComponent).join("/");
const $ = (id) => document.getElementById(id);
const el = (tag, attrs = {}, text) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
};
const getJSON = async (p) => { const r = await fetch(q(p)); if (!r.ok) throw new Error(p + ": " + r.status); return r.json(); };
const fmt = (v, d = 2) => (typeof v === "number" ? (Number.isInteger(v) ? String(v) : v.toFixed(d)) : (v == null ? "-" : String(v)));

const state = { info: null, envs: [], selected: null, urls: {}, frames: 0, tab: "live" };

// ------------------------------------------------------------------------------------ tabs
function show(tab) {
  state.tab = tab;
  for (const s of document.querySelectorAll(".tab")) s.hidden = s.id !== tab;
  for (const b of document.querySelectorAll("nav button")) b.classList.toggle("active", b.dataset.tab === tab);
  if (tab === "map") drawMap();
  if (tab === "train") loadTrain();
  if (tab === "replays") loadReplays();
}
for (const b of document.querySelectorAll("nav button")) b.onclick = () => show(b.dataset.tab);

// ------------------------------------------------------------------------------------ live
function directiveText(d) {
  if (!d) return "";
  const t = d.target ? (d.target.option !== undefined ? "option " + d.target.option : "(" + d.target.x + "," + d.target.y + ")") : "";
  return [d.action, t, d.goal ? "goal: " + d.goal : ""].filter(Boolean).join(" ");
}
function termsText(terms) {
  if (!terms) return "";
  return Object.entries(terms).filter(([, v]) => v).map(([k, v]) => k + " " + fmt(v)).join(", ");
}
function drawTarget(canvas, img, d) {
  const w = canvas.clientWidth, h = canvas.clientHeight;
  canvas.width = w; canvas.height = h;
  const g = canvas.getContext("2d");
  g.clearRect(0, 0, w, h);
  if (!d || !d.target || d.target.x === undefined) return;
  const gw = d.grid_w || 30, gh = d.grid_h || 20;
  const cw = w / gw, ch = h / gh;
  g.strokeStyle = "#ff0"; g.lineWidth = 2;
  g.strokeRect(d.target.x * cw, d.target.y * ch, cw, ch);
  g.fillStyle = "#ff0"; g.font = "11px sans-serif";
  g.fillText(d.action || "", Math.min(d.target.x * cw, w - 40), Math.max(10, d.target.y * ch - 2));
}
function envCard(i) {
  const card = el("div", { class: "env", id: "env-" + i, "data-index": i });
  const img = el("img", { alt: "env " + i, id: "img-" + i });
  const canvas = el("canvas", { id: "cv-" + i });
  const ov = el("div", { class: "ov" });
  ov.append(el("div", { class: "head", id: "head-" + i }), el("div", { class: "directive", id: "dir-" + i }),
    el("div", { class: "reason", id: "why-" + i }), el("div", { class: "terms", id: "terms-" + i }));
  const screen = el("div", { class: "screen" });
  screen.append(img, canvas);
  card.append(screen, ov);
  card.onclick = () => openDetail(i);
  return card;
}
function renderEnvs(snapshot) {
  state.envs = snapshot.envs;
  const grid = $("grid");
  for (const e of snapshot.envs) {
    let card = $("env-" + e.index);
    if (!card) { card = envCard(e.index); grid.append(card); }
    card.classList.toggle("won", !!e.won); card.classList.toggle("lost", !!e.lost);
    const hp = e.hp != null ? " hp " + e.hp : "";
    const end = e.won ? " WON" : (e.lost ? " LOST" : "");
    const from = e.source ? " (" + e.source + ")" : "";
    $("head-" + e.index).textContent = "env " + e.index + from + hp + " return " + fmt(e.return) + " step " + fmt(e.length) + end;
    $("dir-" + e.index).textContent = directiveText(e.directive);
    $("why-" + e.index).textContent = e.directive && e.directive.reasoning ? e.directive.reasoning : "";
    $("terms-" + e.index).textContent = termsText(e.reward_terms);
    drawTarget($("cv-" + e.index), $("img-" + e.index), e.directive);
  }
  if (state.selected !== null) renderDetailText();
  $("status").textContent = snapshot.envs.length + " envs, " + snapshot.viewers + " viewer(s), frames " + state.frames;
}
function setFrame(index, blob) {
  const url = URL.createObjectURL(blob);
  const img = $("img-" + index);
  if (img) { if (state.urls[index]) URL.revokeObjectURL(state.urls[index]); img.src = url; state.urls[index] = url; }
  if (state.selected === index) $("detail-img").src = url;
  state.frames++;
}
function connect() {
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  const ws = new WebSocket(proto + "//" + location.host + q("/ws"));
  state.ws = ws;
  ws.onopen = () => sendFocus();
  ws.binaryType = "arraybuffer";
  ws.onmessage = (m) => {
    if (typeof m.data === "string") { renderEnvs(JSON.parse(m.data)); return; }
    // records of u16 env, u32 seq, u32 length, JPEG (little-endian)
    const view = new DataView(m.data);
    for (let at = 0; at + 10 <= m.data.byteLength;) {
      const index = view.getUint16(at, true), seq = view.getUint32(at + 2, true), size = view.getUint32(at + 6, true);
      setFrame(index, new Blob([new Uint8Array(m.data, at + 10, size)], { type: "image/jpeg" }));
      const img = $("img-" + index); if (img) img.dataset.seq = seq;
      at += 10 + size;
    }
  };
  ws.onclose = () => { $("status").textContent = "disconnected; retrying"; setTimeout(connect, 2000); };
}
function sendFocus() {  // whole frames for the env looked at closely; grid tiles may be smaller
  if (state.ws && state.ws.readyState === 1) state.ws.send(JSON.stringify({ focus: state.selected }));
}
function openDetail(i) {
  state.selected = i;
  sendFocus();
  $("detail").hidden = false;
  $("detail-title").textContent = "env " + i;
  const img = $("img-" + i); if (img && img.src) $("detail-img").src = img.src;
  renderDetailText();
  loadTimeline();
}
$("detail-close").onclick = () => { state.selected = null; $("detail").hidden = true; sendFocus(); };
function renderDetailText() {
  const e = state.envs[state.selected]; if (!e) return;
  const lines = ["return " + fmt(e.return) + "  step " + fmt(e.length)];
  if (e.directive) lines.push("directive: " + directiveText(e.directive), "reasoning: " + (e.directive.reasoning || ""), "source: " + (e.directive.source || "") + (e.directive.reason ? " (" + e.directive.reason + ")" : ""));
  if (e.think) lines.push("think: calls " + fmt(e.think.calls) + ", fallbacks " + fmt(e.think.fallbacks) + ", last latency " + fmt(e.think.last_latency_s) + " s");
  if (e.reward_terms) lines.push("reward terms: " + termsText(e.reward_terms));
  lines.push("", Object.entries(e.info || {}).map(([k, v]) => k + "=" + fmt(v)).join("  "));
  $("detail-overlay").textContent = lines.join("\n");
  drawTarget($("detail-canvas"), $("detail-img"), e.directive);
}
async function loadTimeline() {
  if (state.selected === null) return;
  const i = state.selected;
  const [events, calls] = await Promise.all([getJSON("/api/live/timeline/" + i), getJSON("/api/live/calls/" + i)]);
  const list = $("timeline"); list.textContent = "";
  if (calls.length) {  // the thinker's decision log: what the model saw, was asked, answered
    for (const c of calls.slice().reverse()) {
      const li = el("li", { class: "event call" });
      if (c.frame) li.append(el("img", { src: q("/api/live/calls/" + i + "/frame?file=" + encodeURIComponent(c.frame)), alt: "frame the model saw" }));
      const d = c.directive || {};
      const box = el("div");
      box.append(el("pre", {}, "step " + fmt(c.step) + " (" + (c.trigger || "") + "): " + directiveText(d) + "\n" + (d.reasoning || "") +
        "\nlatency " + fmt(c.latency_s) + " s" + (c.fallback ? ", fallback " + c.fallback : "") + (c.error ? ", error " + c.error : "") +
        (c.outcome ? ", outcome " + c.outcome.status : "")));
      const prompt = el("details"); prompt.append(el("summary", {}, "prompt"), el("pre", {}, c.user || "(none)"));
      const answer = el("details"); answer.append(el("summary", {}, "answer"), el("pre", {}, c.raw || "(none)"));
      box.append(prompt, answer);
      li.append(box);
      list.append(li);
    }
    return;
  }
  if (!events.length) list.append(el("li", { class: "empty" }, "no decisions yet (this env's agent has not given a directive)"));
  for (const ev of events.slice().reverse()) {
    const li = el("li", { class: "event" });
    if (ev.has_frame) li.append(el("img", { src: q("/api/live/timeline/" + i + "/" + ev.id), alt: "frame the model saw" }));
    const d = ev.directive || {};
    const text = "step " + fmt(ev.step) + ": " + directiveText(d) + "\n" + (d.reasoning || "") +
      "\nsource " + (d.source || "-") + (d.reason ? " (" + d.reason + ")" : "") + ", latency " + fmt(ev.latency_s) + " s, fallbacks " + fmt(ev.fallbacks) + (ev.error ? ", error " + ev.error : "");
    li.append(el("pre", {}, text));
    list.append(li);
  }
}
setInterval(() => { if (state.selected !== null && state.tab === "live") loadTimeline().catch(() => {}); }, 1500);

// ------------------------------------------------------------------------------------ map
// the map of `m` (spec, heat [x, y, n]) on `canvas`: areas outlined, squares coloured by visits;
// `m.best` / `m.won` squares (an explorer archive's) outlined; returns the square's size
function paintMap(canvas, m) {
  const g = canvas.getContext("2d");
  const s = m.spec;
  const areas = new Set(Object.keys(s.layout).map(Number));
  if (!s.area) areas.add(0);  // a one-area game: its one area
  let maxX = 0, maxY = 0;
  const origin = (a) => { const l = s.layout[a] || [a % s.columns, Math.floor(a / s.columns)]; return [l[0] * s.width, l[1] * s.height]; };
  for (const a of areas) { const [x, y] = origin(a); maxX = Math.max(maxX, x + s.width); maxY = Math.max(maxY, y + s.height); }
  for (const [x, y] of m.heat) { maxX = Math.max(maxX, x + 1); maxY = Math.max(maxY, y + 1); }
  const cell = Math.max(2, Math.floor(Math.min(1200 / Math.max(1, maxX), 500 / Math.max(1, maxY))));
  canvas.width = maxX * cell; canvas.height = maxY * cell;
  g.fillStyle = "#000"; g.fillRect(0, 0, canvas.width, canvas.height);
  g.strokeStyle = "#446"; g.fillStyle = "#889"; g.font = "12px sans-serif";
  for (const a of areas) { const [x, y] = origin(a); g.strokeRect(x * cell, y * cell, s.width * cell, s.height * cell); g.fillText(s.area ? s.name + " " + a : s.name, x * cell + 3, y * cell + 13); }
  const top = Math.max(1, ...m.heat.map((h) => h[2]));
  for (const [x, y, n] of m.heat) { g.fillStyle = "rgba(255,80,0," + (0.15 + 0.85 * Math.log1p(n) / Math.log1p(top)) + ")"; g.fillRect(x * cell, y * cell, cell, cell); }
  g.lineWidth = 2;
  for (const [list, colour] of [[m.won || [], "#4f4"], [m.best || [], "#0cf"]]) { g.strokeStyle = colour; for (const [x, y] of list) g.strokeRect(x * cell + 1, y * cell + 1, cell - 2, cell - 2); }
  g.lineWidth = 1;
  return cell;
}
async function drawMap() {
  if (!state.info || !state.info.live) { $("map-note").textContent = "no live envs"; return; }
  const m = await getJSON("/api/map");
  const canvas = $("map-canvas"), g = canvas.getContext("2d");
  if (!m.spec) { $("map-note").textContent = "this game's folder declares no world map (world_map.yaml: area, x, y)"; g.clearRect(0, 0, canvas.width, canvas.height); return; }
  const cell = paintMap(canvas, m);
  m.positions.forEach((p, i) => {
    if (!p) return;
    g.fillStyle = "#0cf"; g.beginPath(); g.arc((p[0] + 0.5) * cell, (p[1] + 0.5) * cell, Math.max(3, cell * 0.6), 0, 7); g.fill();
    g.fillStyle = "#fff"; g.fillText(String(i), (p[0] + 1) * cell, p[1] * cell);
  });
  $("map-note").textContent = "positions of " + m.positions.filter(Boolean).length + " envs; heat: " + m.heat.length + " cells visited";
}
setInterval(() => { if (state.tab === "map") drawMap().catch(() => {}); }, 1000);

// ------------------------------------------------------------------------------------ training
function chart(title, points) {
  const box = el("div", { class: "chart" });
  box.append(el("div", {}, title + (points.length ? " (last " + fmt(points[points.length - 1][1], 3) + ")" : "")));
  const c = el("canvas", { width: 300, height: 120 }); box.append(c);
  const g = c.getContext("2d");
  if (points.length) {
    const xs = points.map((p) => p[0]), ys = points.map((p) => p[1]);
    const x0 = Math.min(...xs), x1 = Math.max(...xs), y0 = Math.min(...ys), y1 = Math.max(...ys);
    g.strokeStyle = "#6cf"; g.beginPath();
    points.forEach(([x, y], k) => {
      const px = 4 + (x1 > x0 ? (x - x0) / (x1 - x0) : 0.5) * 292, py = 116 - (y1 > y0 ? (y - y0) / (y1 - y0) : 0.5) * 112;
      k ? g.lineTo(px, py) : g.moveTo(px, py);
    });
    g.stroke();
  }
  return box;
}
const PREFERRED = ["time/fps", "rollout/ep_rew_mean", "episode/return_mean", "episode/win_rate", "train/loss", "train/value_loss", "train/policy_gradient_loss", "train/entropy_loss"];
async function loadTrain() {
  if (!state.info.replays) { $("runs").textContent = "no run directory (start with metabonk watch RUN_DIR)"; return; }
  const data = await getJSON("/api/train");
  const runs = $("runs"); runs.textContent = "";
  for (const [rel, r] of Object.entries(data.runs)) {
    const s = r.state || {};
    runs.append(el("h3", {}, "run " + rel + ": " + (s.status || "") + " " + (s.env_id || "") + (s.engine ? " (" + s.engine + ")" : "")));
    const t = el("table"); runs.append(t);
    for (const k of ["num_timesteps", "stage", "stage_index", "milestones", "best_member", "best_score", "win_rate", "mean_return", "members"]) {
      if (s[k] !== undefined) { const tr = el("tr"); tr.append(el("th", {}, k), el("td", {}, typeof s[k] === "object" ? JSON.stringify(s[k]) : fmt(s[k]))); t.append(tr); }
    }
    if (r.exploits && r.exploits.length) runs.append(el("pre", {}, "PBT exploits:\n" + r.exploits.map((e) => JSON.stringify(e)).join("\n")));
    if (r.plan) runs.append(el("pre", {}, "curriculum plan:\n" + r.plan));
  }
  const charts = $("charts"); charts.textContent = "";
  if (data.error) charts.append(el("p", {}, data.error));
  for (const [folder, tags] of Object.entries(data.scalars)) {
    charts.append(el("h3", {}, "TensorBoard: " + folder));
    const names = Object.keys(tags).sort((a, b) => (PREFERRED.indexOf(b) + 1 || -99) - (PREFERRED.indexOf(a) + 1 || -99) || a.localeCompare(b));
    const ordered = PREFERRED.filter((t) => tags[t]).concat(names.filter((t) => !PREFERRED.includes(t)));
    for (const tag of ordered) charts.append(chart(tag, tags[tag]));
  }
}
setInterval(() => { if (state.tab === "train") loadTrain().catch(() => {}); }, 10000);

// ------------------------------------------------------------------------------------ replays
function link(text, fn) { const a = el("a", { href: "#" }, text); a.onclick = (ev) => { ev.preventDefault(); fn(); }; return a; }
async function loadReplays() {
  if (!state.info.replays) { $("replay-list").textContent = "no directory to browse (metabonk watch DIR)"; return; }
  const found = await getJSON("/api/scan");
  const list = $("replay-list"); list.textContent = "";
  const section = (title, items, fn) => { if (!items.length) return; const p = el("p"); p.append(el("strong", {}, title + ": ")); for (const it of items) p.append(link(it, () => fn(it))); list.append(p); };
  section("videos", found.videos, showVideo);
  section("datasets", found.datasets, showDataset);
  section("decision logs", found.decisions, showDecisions);
  section("memory", found.memory, showMemory);
  section("ladders", found.ladders, showLadder);
  section("pages", found.pages, (p) => window.open(fileUrl(p), "_blank", "noopener,noreferrer"));
  section("explorer archives", found.archives || [], showArchive);
  if (!list.children.length) list.textContent = "nothing to replay here";
  return found;
}
function view() { const v = $("replay-view"); v.textContent = ""; return v; }
function showVideo(p) { const v = view(); v.append(el("h3", {}, p)); const vid = el("video", { id: "replay-video", src: fileUrl(p), controls: "", width: 480 }); v.append(vid); }
async function showDataset(p) {
  const v = view(); v.append(el("h3", {}, "dataset " + p));
  const data = await getJSON("/api/dataset?path=" + encodeURIComponent(p));
  const pick = el("select", { id: "ds-episode" });
  data.episodes.forEach((e) => pick.append(el("option", { value: e.index }, "episode " + e.index + " (" + e.steps + " steps)")));
  const slider = el("input", { type: "range", id: "ds-step", min: 0, value: 0 });
  const label = el("span", { id: "ds-label" });
  const img = el("img", { id: "ds-frame", alt: "observation" });
  const action = el("div", { id: "ds-action" });
  const infos = el("pre", { id: "ds-infos" });
  v.append(pick, el("br"), slider, label, el("br"), img, action, infos);
  const load = async () => {
    const ep = Number(pick.value), st = Number(slider.value);
    const base = "?path=" + encodeURIComponent(p) + "&episode=" + ep + "&step=" + st;
    const s = await getJSON("/api/dataset/step" + base);
    if (Number(slider.value) !== st || Number(pick.value) !== ep) return;  // scrubbed on meanwhile
    img.src = q("/api/dataset/frame" + base);
    label.textContent = " step " + s.step + " / " + (s.steps - 1);
    action.textContent = "action " + JSON.stringify(s.action) + "  reward " + fmt(s.reward, 3) + (s.terminated ? "  terminated" : "") + (s.truncated ? "  truncated" : "");
    action.dataset.step = s.step;
    infos.textContent = Object.entries(s.infos).map(([k, x]) => k + "=" + fmt(x)).join("  ");
  };
  const setEpisode = () => { const e = data.episodes[Number(pick.value)]; slider.max = Math.max(0, (e ? e.steps : 1) - 1); slider.value = 0; load(); };
  pick.onchange = setEpisode; slider.oninput = load;
  setEpisode();
}
async function showDecisions(p) {
  const v = view(); v.append(el("h3", {}, "decisions " + p));
  const records = await getJSON("/api/decisions?path=" + encodeURIComponent(p));
  const t = el("table", { id: "decisions" }); v.append(t);
  const head = el("tr"); ["id", "step", "frame", "prompt", "answer", "directive", "latency s", "fallback", "outcome"].forEach((h) => head.append(el("th", {}, h))); t.append(head);
  for (const r of records) {
    const tr = el("tr");
    const frame = el("td"); if (r.frame) frame.append(el("img", { src: fileUrl((p === "." ? "" : p + "/") + r.frame), width: 120 }));
    const d = r.directive || {};
    tr.append(el("td", {}, fmt(r.id)), el("td", {}, fmt(r.step)), frame, el("td", {}, (r.user || "").slice(0, 400)), el("td", {}, (r.raw || "").slice(0, 400)),
      el("td", {}, directiveText(d) + " " + (d.reasoning || "")), el("td", {}, fmt(r.latency_s)), el("td", {}, r.fallback || ""), el("td", {}, r.outcome ? r.outcome.status : "-"));
    t.append(tr);
  }
}
async function showMemory(p) {
  const v = view(); v.append(el("h3", {}, "memory " + p));
  try {
    const s = await getJSON("/api/memory?path=" + encodeURIComponent(p));
    v.append(el("img", { id: "memory-map", src: q("/api/memory/map?path=" + encodeURIComponent(p)), alt: "memory map" }));
    v.append(el("pre", { id: "memory-summary" }, JSON.stringify(s, null, 1)));
  } catch (err) { v.append(el("p", {}, "cannot read: " + err)); }
}
async function showArchive(p) {
  const v = view(); v.append(el("h3", {}, "explorer archive " + p));
  const r = await fetch(q("/api/archive?path=" + encodeURIComponent(p)));
  if (!r.ok) { v.append(el("p", { id: "archive-note" }, "cannot read: " + (await r.text()))); return; }
  const m = await r.json();
  const canvas = el("canvas", { id: "archive-canvas" }); v.append(canvas);
  paintMap(canvas, m);
  v.append(el("p", { id: "archive-note" }, m.env_id + ": " + m.cells + " cells (" + m.kind + ", placed on the " + m.placed + "), " + m.frames + " frames, best score " + fmt(m.best_score) +
    "; colour: times seen; blue: the best cell" + (m.won.length ? ", green: won cells" : "")));
}
async function showLadder(p) {
  const v = view(); v.append(el("h3", {}, "ladder " + p));
  const r = await fetch(fileUrl(p)); const data = await r.json();
  const rows = Array.isArray(data) ? data : (data.cells || data.entries || data.rows || []);
  const t = el("table", { id: "ladder-table" }); v.append(t);
  if (rows.length) {
    const keys = Object.keys(rows[0]).filter((k) => typeof rows[0][k] !== "object");
    const own = keys.includes("rank");  // a ladder ranks its cells itself (within each env)
    const head = el("tr"); if (!own) head.append(el("th", {}, "rank")); keys.forEach((k) => head.append(el("th", {}, k))); t.append(head);
    rows.forEach((row, k) => { const tr = el("tr"); if (!own) tr.append(el("td", {}, String(k + 1))); keys.forEach((key) => tr.append(el("td", {}, fmt(row[key])))); t.append(tr); });
  } else v.append(el("pre", {}, JSON.stringify(data, null, 1).slice(0, 20000)));
}

// ------------------------------------------------------------------------------------ start
(async () => {
  state.info = await getJSON("/api/info");
  $("label").textContent = state.info.label || state.info.root || "";
  if (state.info.live) { connect(); show("live"); }
  else { $("tab-live").hidden = true; $("tab-map").hidden = true; show(state.info.replays ? "replays" : "train"); }
})();
