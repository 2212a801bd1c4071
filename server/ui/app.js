// spice-orch web UI. Plain JavaScript, no dependencies. Model and tool
// text is untrusted: every piece of it is set with textContent, never
// parsed as HTML, and through visible(), so that it cannot hide or
// reorder what the page shows.
"use strict";

const $ = (id) => document.getElementById(id);

// Control characters other than newline and tab, bidirectional marks,
// embeddings, overrides and isolates, and zero-width characters: text
// could use them to show something other than it says (U+202E turns the
// rest of a line around). They are shown as escapes, as the CLI does.
const hidden = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]/g;

// visible returns s with every hidden character shown as \xNN or \uNNNN.
function visible(s) {
  return String(s).replace(hidden, (c) => {
    const n = c.charCodeAt(0);
    return n < 0x100 ? "\\x" + n.toString(16).padStart(2, "0") : "\\u" + n.toString(16).padStart(4, "0");
  });
}

// el builds an element; text, when given, is set as visible text.
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = visible(text);
  return e;
}

async function api(method, path, body, type) {
  const opts = { method, headers: {} };
  if (body !== undefined) {
    opts.body = body;
    opts.headers["Content-Type"] = type;
  }
  // A server that is down, or a dropped connection, is an answer too: the
  // page says so and retries, instead of throwing into the console.
  let r;
  try {
    r = await fetch(path, opts);
  } catch (_) {
    $("offline").hidden = false;
    return { status: 0, data: null };
  }
  $("offline").hidden = true;
  let data = null;
  try { data = await r.json(); } catch (_) { data = null; }
  return { status: r.status, data };
}

// ---- start form and pairs list ----

let examples = [];

async function loadExamples() {
  const { status, data } = await api("GET", "/v1/examples");
  if (status !== 200 || !data) return;
  examples = data.examples || [];
  const sel = $("example");
  sel.textContent = "";
  examples.forEach((ex, i) => {
    const o = el("option", null, ex.name + (ex.description ? " — " + ex.description : ""));
    o.value = String(i);
    sel.appendChild(o);
  });
  const o = el("option", null, "(paste your own)");
  o.value = "";
  sel.appendChild(o);
  if (examples.length) $("spec").value = examples[0].spec;
}

function bodyType(text) {
  const t = text.trimStart();
  return t.startsWith("{") ? "application/json" : "application/yaml";
}

async function startPair(ev) {
  ev.preventDefault();
  const spec = $("spec").value;
  const task = $("task").value.trim();
  $("start-error").textContent = "";
  $("start").disabled = true;
  try {
    const q = task ? "?task=" + encodeURIComponent(task) : "";
    const { status, data } = await api("POST", "/v1/pairs" + q, spec, bodyType(spec));
    if (status === 201 && data) {
      location.hash = "#/pairs/" + encodeURIComponent(data.id);
      refreshPairs();
      return;
    }
    const e = (data && data.error) || { message: "HTTP " + status };
    $("start-error").textContent = visible(e.message + (e.field ? " (field " + e.field + ")" : ""));
  } finally {
    $("start").disabled = false;
  }
}

let autoOpened = false;

// The list shows the first page, refreshed every two seconds, and the
// pages "More" fetched after it, with the API's filters.
const list = { next: "", more: [] };

function listQuery() {
  const q = new URLSearchParams();
  const search = $("search").value.trim();
  if (search) q.set("q", search);
  if ($("filter-state").value) q.set("state", $("filter-state").value);
  const reason = $("filter-reason").value.trim();
  if (reason) q.set("reason", reason);
  q.set("limit", "50");
  return q;
}

function filtered() {
  return $("search").value.trim() !== "" || $("filter-state").value !== "" || $("filter-reason").value.trim() !== "";
}

async function refreshPairs() {
  const { status, data } = await api("GET", "/v1/pairs?" + listQuery());
  if (status !== 200 || !data) return;
  // Opened without a pair in the address: show the newest live one, else
  // the newest one (the demo pair, once it has ended).
  if (!autoOpened && !view && !location.hash && !filtered()) {
    autoOpened = true;
    const live = data.pairs.find((p) => p.state === "running" || p.state === "queued") || data.pairs[0];
    if (live) location.hash = "#/pairs/" + encodeURIComponent(live.id);
  }
  if (list.more.length === 0) list.next = data.next_cursor || "";
  drawPairs(data.pairs.concat(list.more.filter((p) => !data.pairs.some((q) => q.id === p.id))));
}

async function morePairs() {
  if (!list.next) return;
  const q = listQuery();
  q.set("cursor", list.next);
  const { status, data } = await api("GET", "/v1/pairs?" + q);
  if (status !== 200 || !data) return;
  list.more = list.more.concat(data.pairs);
  list.next = data.next_cursor || "";
  refreshPairs();
}

function resetList() {
  list.more = [];
  list.next = "";
  refreshPairs();
}

function drawPairs(pairs) {
  const ul = $("pairs");
  ul.textContent = "";
  for (const p of pairs) {
    const li = el("li", "pair-item");
    li.dataset.id = p.id;
    const a = el("a", null, p.id);
    a.href = "#/pairs/" + encodeURIComponent(p.id);
    li.appendChild(a);
    li.appendChild(el("span", "state state-" + p.state, p.state));
    if (p.reason) li.appendChild(el("span", "reason", p.reason));
    // The columns of `runs list`: name, start, duration, workers.
    const cols = [p.name || "", p.started ? clock(p.started) : "", p.started && p.ended ? duration(Date.parse(p.ended) - Date.parse(p.started)) : "", (p.workers || []).join(", ")];
    li.appendChild(el("span", "cols", cols.filter((c) => c).join(" · ")));
    if (p.task) li.appendChild(el("span", "task", "task: " + p.task));
    if (view && view.id === p.id) li.classList.add("current");
    ul.appendChild(li);
  }
  $("more").hidden = !list.next;
}

// clock shows an RFC 3339 time as the browser's local date and time.
function clock(t) {
  const d = new Date(t);
  return isNaN(d) ? String(t) : d.toLocaleString();
}

// duration shows milliseconds as 850ms, 2.4s, 3m05s or 1h02m.
function duration(ms) {
  if (!(ms >= 0)) return "";
  if (ms < 1000) return Math.round(ms) + "ms";
  if (ms < 60000) return (ms / 1000).toFixed(1) + "s";
  const s = Math.round(ms / 1000);
  if (s < 3600) return Math.floor(s / 60) + "m" + String(s % 60).padStart(2, "0") + "s";
  return Math.floor(s / 3600) + "h" + String(Math.floor(s / 60) % 60).padStart(2, "0") + "m";
}

// ---- the pair view ----

let view = null; // the pair on screen

class PairView {
  constructor(id) {
    this.id = id;
    this.last = 0;          // last sequence shown
    this.seqs = [];         // every sequence shown, in order (tests read it)
    this.raw = new Map();   // seq -> raw JSON
    this.lanes = new Map(); // worker -> lane index
    this.totals = [newTotals(), newTotals()];
    this.texts = new Map(); // operation_id -> text element
    this.tools = new Map(); // call_id -> tool element
    this.unpinned = new Set(); // tools whose code is not pinned (an HTTP MCP server's)
    this.row = 0;
    this.ended = false;
    this.cancellable = false; // the server says it can cancel the pair
    this.es = null;
    this.starts = new Map(); // run, operation or call ID -> [start ms, block]
    this.spans = [];         // ended steps: {label, lane, start, end, node}
    this.first = 0;          // the time of the first event, in ms
    this.lastTime = 0;       // the time of the last event, in ms
    this.drawTimer = 0;
    this.asking = 0;         // the timer that polls pending questions
    this.calls = new Map();  // call_id -> arguments, from pair.model_output
    this.runOf = new Map();  // worker -> its current run ID
    this.answers = new Map(); // run ID -> the text of its last model output
    this.task = null;         // the pair's task, once the resource says it
  }

  open() {
    $("empty").hidden = true;
    $("pair").hidden = false;
    $("pair-id").textContent = visible(this.id);
    $("timeline").textContent = "";
    $("raw-json").textContent = "";
    $("pair-notice").textContent = "";
    $("pair-spec").textContent = "";
    $("pair-spec-box").hidden = true;
    $("resume").hidden = true;
    $("resume-box").textContent = "";
    $("resume-box").hidden = true;
    for (const id of ["pair-name", "pair-task", "pair-time", "slowest"]) $(id).textContent = "";
    $("waterfall").textContent = "";
    for (const i of [0, 1]) {
      const h = $("lane-head-" + i);
      h.querySelector(".lane-name").textContent = "";
      h.querySelector(".totals").textContent = "";
      h.querySelector(".system").hidden = true;
      h.querySelector(".system-text").textContent = "";
      const q = h.querySelector(".pending-question");
      q.textContent = "";
      q.hidden = true;
    }
    this.setState("…", "");
    this.fetchState();
    this.connect(0);
  }

  close() {
    if (this.es) this.es.close();
    this.es = null;
    clearTimeout(this.asking);
    this.asking = 0;
  }

  async fetchState() {
    const { status, data } = await api("GET", "/v1/pairs/" + encodeURIComponent(this.id));
    if (view !== this) return;
    if (status === 200 && data) {
      this.cancellable = data.cancellable === true;
      this.setState(data.state, data.reason || "");
      $("pair-name").textContent = visible(data.name || "");
      $("pair-task").textContent = visible(data.task || "(the spec's task)");
      this.task = data.task || "";
      this.unpinned = new Set(data.unpinned_tools || []);
      for (const d of this.tools.values()) this.markUnpinned(d);
      if (data.started) {
        $("pair-time").textContent = "started " + clock(data.started) +
          (data.ended ? " · took " + duration(Date.parse(data.ended) - Date.parse(data.started)) : "");
      }
      // Marked once the stream has ended, so the marker follows the last
      // event (finish marks it too).
      if (data.state === "interrupted" && this.ended) this.interrupted();
      this.showSpec(data.spec);
      // Resume is offered for a pair the server says it can continue.
      $("resume").hidden = !data.resumable;
      $("resume").disabled = !data.resumable;
      (data.workers || []).forEach((w, i) => {
        if (i < 2 && !this.lanes.has(w.role)) this.setLane(i, w.role);
        if (w.system) {
          const h = $("lane-head-" + this.lane(w.role));
          h.querySelector(".system-text").textContent = visible(w.system);
          h.querySelector(".system").hidden = false;
        }
      });
      const live = data.state === "queued" || data.state === "running";
      if (live || data.waiting > 0) this.pollQuestions();
      else this.showQuestions([]);
    } else if (status === 404) {
      this.setState("unknown", "");
      $("pair-notice").textContent = "No such pair.";
    }
  }

  // markUnpinned badges a tool card whose tool's code is not pinned.
  markUnpinned(d) {
    const name = d.querySelector(".tool-name").textContent;
    if (!this.unpinned.has(name) || d.querySelector(".unpinned-badge")) return;
    const b = el("span", "badge unpinned-badge", "unpinned");
    b.title = "served by an MCP server whose code is not pinned (streamable HTTP)";
    d.querySelector(".tool-name").after(b);
  }

  setState(state, reason) {
    const s = $("pair-state");
    s.textContent = visible(state);
    s.className = "state state-" + state;
    $("pair-reason").textContent = visible(reason);
    // Cancel is offered only when the server says it can: not for a pair
    // another process plays, nor while a cancel is under way.
    const live = state === "queued" || state === "running";
    $("cancel").disabled = !(live && this.cancellable);
  }

  connect(after) {
    this.close();
    const url = "/v1/pairs/" + encodeURIComponent(this.id) + "/events" + (after ? "?after=" + after : "");
    const es = new EventSource(url);
    this.es = es;
    es.onmessage = (m) => this.onEvent(m.data);
    es.addEventListener("end", (m) => {
      es.close();
      this.ended = true;
      this.finish();
      let d = {};
      try { d = JSON.parse(m.data); } catch (_) { /* keep {} */ }
      this.fetchState();
      refreshPairs();
      document.body.dataset.streamEnded = String(d.last_seq || this.last);
    });
    es.addEventListener("out_of_range", (m) => {
      let d = {};
      try { d = JSON.parse(m.data); } catch (_) { /* keep {} */ }
      $("pair-notice").textContent = "Events " + (this.last + 1) + " to " + d.recovery + " are no longer available; continuing from " + d.recovery + ".";
      if (typeof d.recovery === "number" && d.recovery > this.last) this.connect(d.recovery);
      else es.close();
    });
    // On an error EventSource reconnects by itself with Last-Event-ID;
    // the server resumes after it, and onEvent ignores anything seen.
  }

  onEvent(text) {
    let e;
    try { e = JSON.parse(text); } catch (_) { return; }
    if (typeof e.seq !== "number" || e.seq <= this.last) return; // seen already
    if (e.seq !== this.last + 1) {
      document.body.dataset.gap = String(this.last + 1);
    }
    this.last = e.seq;
    this.seqs.push(e.seq);
    this.raw.set(e.seq, text);
    const at = Date.parse(e.time);
    if (at >= 0) {
      if (!this.first) this.first = at;
      this.lastTime = at;
    }
    this.at = at;
    document.body.dataset.lastSeq = String(e.seq);
    this.render(e);
  }

  setLane(i, role) {
    this.lanes.set(role, i);
    $("lane-head-" + i).querySelector(".lane-name").textContent = visible(role);
    this.showTotals(i);
  }

  lane(worker) {
    if (!this.lanes.has(worker)) this.setLane(Math.min(this.lanes.size, 1), worker);
    return this.lanes.get(worker);
  }

  showTotals(i) {
    const t = this.totals[i];
    $("lane-head-" + i).querySelector(".totals").textContent =
      t.runs + " runs · " + t.turns + " turns · " + (t.input + t.output) + " tokens (" + t.input + " in, " + t.output + " out) · " + t.tools + " tool calls";
  }

  // place puts a block in the timeline: in a lane, or across both.
  place(node, lane, seq) {
    this.row++;
    node.style.gridRow = String(this.row);
    node.style.gridColumn = lane === -1 ? "1 / 3" : String(lane + 1);
    node.dataset.seqs = String(seq);
    node.addEventListener("click", (ev) => { ev.stopPropagation(); this.showRaw(node); });
    $("timeline").appendChild(node);
    return node;
  }

  addSeq(node, seq) {
    node.dataset.seqs += " " + seq;
  }

  showRaw(node) {
    const out = [];
    for (const s of node.dataset.seqs.split(" ")) {
      const t = this.raw.get(Number(s));
      if (!t) continue;
      try { out.push(JSON.stringify(JSON.parse(t), null, 2)); } catch (_) { out.push(t); }
    }
    $("raw-json").textContent = visible(out.join("\n\n"));
    document.querySelectorAll(".selected").forEach((n) => n.classList.remove("selected"));
    node.classList.add("selected");
  }

  render(e) {
    const p = e.payload || {};
    switch (e.kind) {
      case "pair.started": {
        const w = p.workers || {};
        if (w.first) this.setLane(0, w.first);
        if (w.second) this.setLane(1, w.second);
        const n = el("div", "block pair-event", "pair started · " + (p.pattern || "") + " · plan " + (p.plan_id || ""));
        this.place(n, -1, e.seq);
        this.setState("running", "");
        return;
      }
      case "pair.handoff": {
        const from = this.lane(p.from), to = this.lane(p.to);
        const n = el("div", "block handoff " + (from < to ? "right" : "left"));
        n.appendChild(el("span", "arrow", from < to ? "⟶" : "⟵"));
        n.appendChild(el("span", "handoff-text",
          "handoff round " + p.round + ": " + p.from + " → " + p.to + " · " + p.bytes + " bytes · sha256 " + String(p.sha256 || "").slice(0, 12) + "…" + (p.cut ? " · cut" : "")));
        n.title = "sha256 " + (p.sha256 || "");
        this.place(n, -1, e.seq);
        this.handoffMessage(n, p);
        return;
      }
      case "pair.model_output": {
        // One model operation's whole output: its calls' arguments for
        // the tool cards, its text for the handoff that may quote it.
        const calls = p.calls || {};
        for (const k of Object.keys(calls)) {
          const c = calls[k] || {};
          if (c.id) this.calls.set(c.id, c.arguments === undefined ? "" : c.arguments);
        }
        const run = this.runOf.get(p.worker);
        if (run) this.answers.set(run, p.text || "");
        const n = this.texts.get(p.operation_id);
        if (n) this.addSeq(n, e.seq);
        return;
      }
      case "pair.resumed": {
        const n = el("div", "block pair-event resumed", "pair resumed after sequence " + p.from_seq + " (resume " + p.resumes + ")" +
          (p.boundary === "replay" ? " · restarting run " + shortID(p.run_id) + " of " + p.worker + " · " + p.served_model + " model output(s) and " + p.served_tools + " tool outcome(s) served from the record"
            : " · after its last completed run") +
          (p.accepted && p.accepted.length ? " · accepted as failed: " + p.accepted.join(", ") : ""));
        this.place(n, -1, e.seq);
        this.setState("running", "");
        return;
      }
      case "pair.completed":
      case "pair.failed":
      case "pair.cancelled": {
        const n = el("div", "block terminal " + e.kind.replace(".", "-"),
          e.kind + " · reason " + p.reason + (p.limit ? " (" + p.limit + ")" : "") + " · " + p.rounds + " rounds · " + p.runs + " runs · " +
          (p.input_tokens + p.output_tokens) + " tokens · " + p.tool_calls + " tool calls" +
          (p.problem ? " · " + p.problem.code + (p.problem.message ? ": " + p.problem.message : "") : ""));
        this.place(n, -1, e.seq);
        this.setState(e.kind.slice(5), p.reason || "");
        this.terminal = true;
        return;
      }
    }
    if (p.worker === undefined) {
      this.place(el("div", "block", e.kind), -1, e.seq);
      return;
    }
    this.relayed(e, p.worker, p.payload || {});
  }

  relayed(e, worker, q) {
    const i = this.lane(worker);
    const t = this.totals[i];
    switch (e.kind) {
      case "run.started":
        t.runs++;
        this.runOf.set(worker, q.run_id);
        this.begin(q.run_id, this.place(el("div", "block run", "run " + shortID(q.run_id) + " · " + (q.model || "")), i, e.seq));
        break;
      case "turn.started":
        t.turns++;
        this.place(el("div", "block turn", "turn " + q.index), i, e.seq);
        break;
      case "model.started": {
        const n = textBlock();
        this.texts.set(q.operation_id, n);
        this.place(n, i, e.seq);
        this.begin(q.operation_id, n);
        break;
      }
      case "model.text_delta": {
        let n = this.texts.get(q.operation_id);
        if (!n) {
          n = textBlock();
          this.texts.set(q.operation_id, n);
          this.place(n, i, e.seq);
        } else {
          this.addSeq(n, e.seq);
        }
        appendText(n, visible(q.text || ""));
        break;
      }
      case "model.completed":
      case "model.failed":
      case "model.cancelled": {
        const n = this.texts.get(q.operation_id);
        if (e.kind === "model.completed") {
          t.input += q.input_tokens || 0;
          t.output += q.output_tokens || 0;
        }
        if (n) {
          n.classList.remove("streaming");
          this.addSeq(n, e.seq);
          const body = n.querySelector(".text-body");
          if (!body.textContent) n.classList.add("silent");
          const meta = n.appendChild(el("span", "meta", e.kind === "model.completed"
            ? (q.input_tokens || 0) + " in / " + (q.output_tokens || 0) + " out tokens" + (q.tool_calls ? " · " + q.tool_calls + " tool calls" : "")
            : e.kind.slice(6) + (q.problem ? ": " + q.problem.code : "")));
          this.end(q.operation_id, meta, "model " + worker, i);
        }
        break;
      }
      case "tool.started": {
        t.tools++;
        const d = el("details", "block tool" + (q.effect === "mutating" ? " mutating" : ""));
        const s = el("summary", null);
        s.appendChild(el("span", "tool-name", q.name));
        if (q.effect === "mutating") s.appendChild(el("span", "badge mutating-badge", "mutating"));
        else if (q.effect) s.appendChild(el("span", "badge", q.effect.replace("_", "-")));
        s.appendChild(el("span", "tool-status", "running…"));
        d.appendChild(s);
        const body = el("div", "tool-body");
        body.appendChild(el("div", "kv", "call " + shortID(q.call_id) + (q.replay ? " · replay " + q.replay : "")));
        // The arguments come from the model operation's recorded output
        // (pair.model_output), written before the call starts.
        const args = this.calls.get(q.call_id);
        if (args !== undefined) {
          body.appendChild(el("div", "kv", "arguments"));
          body.appendChild(el("pre", "tool-args", prettyMaybe(args)));
        } else {
          body.appendChild(el("div", "kv", "arguments: not recorded"));
        }
        d.appendChild(body);
        this.tools.set(q.call_id, d);
        this.markUnpinned(d);
        this.place(d, i, e.seq);
        this.begin(q.call_id, d, s);
        break;
      }
      case "tool.progress":
      case "tool.completed":
      case "tool.failed":
      case "tool.cancelled": {
        const d = this.tools.get(q.call_id);
        if (!d) { this.place(el("div", "block", e.kind), i, e.seq); break; }
        this.addSeq(d, e.seq);
        if (e.kind === "tool.progress") break;
        const status = d.querySelector(".tool-status");
        status.textContent = e.kind.slice(5);
        this.end(q.call_id, status, "tool " + (d.querySelector(".tool-name").textContent), i);
        d.classList.add(e.kind.replace(".", "-"));
        if (q.outcome === "uncertain") {
          d.classList.add("uncertain");
          d.querySelector("summary").appendChild(el("span", "badge uncertain-badge", "uncertain"));
        }
        const body = d.querySelector(".tool-body");
        if (q.content !== undefined) {
          body.appendChild(el("div", "kv", "result"));
          body.appendChild(el("pre", "result", prettyMaybe(q.content)));
        }
        if (q.problem) body.appendChild(el("div", "kv", "problem " + q.problem.code + (q.problem.message ? ": " + q.problem.message : "")));
        break;
      }
      case "run.completed":
        this.end(q.run_id, this.place(el("div", "block run-end", "run completed · " + q.turns + " turns · " + ((q.input_tokens || 0) + (q.output_tokens || 0)) + " tokens"), i, e.seq), "run " + shortID(q.run_id), i);
        break;
      case "run.failed":
      case "run.cancelled":
        this.end(q.run_id, this.place(el("div", "block run-end " + e.kind.replace(".", "-"), e.kind + (q.problem ? " · " + q.problem.code : "")), i, e.seq), "run " + shortID(q.run_id), i);
        break;
      case "turn.completed":
      case "turn.failed":
      case "turn.cancelled":
        // Turns are drawn when they start; their ends only count.
        break;
      default:
        this.place(el("div", "block", e.kind), i, e.seq);
    }
    this.showTotals(i);
  }
}

// Timing. Every event carries the time it was recorded; a run, model
// operation or tool call lasts from its start event to its end event.
PairView.prototype.begin = function (key, node, where) {
  if (key && this.at >= 0) {
    this.starts.set(key, [this.at, node]);
    (where || node).appendChild(el("span", "dur start", "at +" + duration(this.at - this.first)));
  }
};

PairView.prototype.end = function (key, where, label, lane) {
  const s = this.starts.get(key);
  if (!s || !(this.at >= 0)) return;
  this.starts.delete(key);
  const ms = this.at - s[0];
  where.appendChild(el("span", "dur took", "took " + duration(ms)));
  this.spans.push({ label, lane, start: s[0], end: this.at, node: s[1] });
  if (!this.drawTimer) this.drawTimer = setTimeout(() => { this.drawTimer = 0; this.drawWaterfall(); }, 500);
};

// drawWaterfall draws every ended step on one time axis, the slowest
// marked in it and in the timeline.
PairView.prototype.drawWaterfall = function () {
  if (view !== this) return;
  const box = $("waterfall");
  box.textContent = "";
  const from = this.first, span = Math.max(1, this.lastTime - this.first);
  let slow = null;
  // A run lasts as long as its steps together: the slowest is a step.
  for (const x of this.spans) {
    if (!x.label.startsWith("run ") && (!slow || x.end - x.start > slow.end - slow.start)) slow = x;
  }
  document.querySelectorAll("#timeline .slowest").forEach((n) => n.classList.remove("slowest"));
  for (const x of this.spans) {
    const row = el("div", "wf-row lane-" + x.lane + (x === slow ? " slowest" : ""));
    row.appendChild(el("span", "wf-label", x.label));
    const track = el("span", "wf-track");
    const bar = el("span", "wf-bar");
    bar.style.left = ((x.start - from) / span * 100) + "%";
    bar.style.width = ((x.end - x.start) / span * 100) + "%";
    track.appendChild(bar);
    row.appendChild(track);
    row.appendChild(el("span", "wf-dur", duration(x.end - x.start)));
    row.addEventListener("click", () => { x.node.scrollIntoView({ block: "center" }); this.showRaw(x.node); });
    box.appendChild(row);
  }
  if (slow) {
    slow.node.classList.add("slowest");
    $("slowest").textContent = visible("· slowest: " + slow.label + ", " + duration(slow.end - slow.start));
  }
};

// finish runs when the stream ends: a step that never ended has no
// caret any more, and a pair without a terminal event is marked.
PairView.prototype.finish = function () {
  if (this.drawTimer) { clearTimeout(this.drawTimer); this.drawTimer = 0; }
  this.drawWaterfall();
  for (const n of this.texts.values()) {
    if (n.classList.contains("streaming")) {
      n.classList.remove("streaming");
      n.classList.add("cut");
    }
  }
  if (!this.terminal) this.interrupted();
};

PairView.prototype.interrupted = function () {
  if (this.marked) return;
  this.marked = true;
  for (const n of this.texts.values()) n.classList.remove("streaming");
  this.place(el("div", "block terminal interrupted-marker", "interrupted · the pair stopped without a terminal event (its server ended)"), -1, this.last);
};

// shownText is how much of an answer a block shows until "show all" is
// clicked: laying out megabytes of text on every frame would make a long
// pair slow to draw.
const shownText = 8192;

// appendText adds text to a model operation's block, to its one Text node
// while the block shows less than shownText, else to what "show all" adds.
function appendText(n, t) {
  const node = n.firstChild.firstChild;
  if (n.rest === undefined && node.length + t.length <= shownText) {
    node.appendData(t);
    return;
  }
  if (n.rest === undefined) {
    const room = Math.max(0, shownText - node.length);
    node.appendData(t.slice(0, room));
    n.rest = [t.slice(room)];
    n.restLen = t.length - room;
    const more = el("button", "show-all", "");
    more.type = "button";
    more.addEventListener("click", (ev) => {
      ev.stopPropagation();
      node.appendData(n.rest.join(""));
      n.rest = undefined;
      more.remove();
    });
    n.insertBefore(more, n.firstChild.nextSibling);
    n.more = more;
  } else {
    n.rest.push(t);
    n.restLen += t.length;
  }
  n.more.textContent = "show all (" + n.restLen + " more characters)";
}

// textBlock is a model operation's block: its text lives in one Text node.
function textBlock() {
  const n = el("div", "block text streaming");
  const body = el("span", "text-body");
  body.appendChild(document.createTextNode(""));
  n.appendChild(body);
  return n;
}

function newTotals() { return { runs: 0, turns: 0, input: 0, output: 0, tools: 0 }; }

function shortID(s) {
  s = String(s || "");
  const i = s.lastIndexOf("/");
  return i >= 0 ? s.slice(i + 1) : s;
}

function prettyMaybe(s) {
  try { return JSON.stringify(JSON.parse(s), null, 2); } catch (_) { return String(s); }
}

// ---- routing ----

function route() {
  const m = location.hash.match(/^#\/pairs\/(.+)$/);
  const id = m ? decodeURIComponent(m[1]) : null;
  if (view && view.id === id) return;
  if (view) view.close();
  view = null;
  delete document.body.dataset.lastSeq;
  delete document.body.dataset.streamEnded;
  delete document.body.dataset.gap;
  if (!id) {
    $("pair").hidden = true;
    $("empty").hidden = false;
    return;
  }
  view = new PairView(id);
  window.spiceView = view; // for the browser tests
  view.open();
  refreshPairs();
}

// showSpec shows the spec the pair was submitted with (the server leaves
// its secrets out), as text, with its workers and models in the summary.
PairView.prototype.showSpec = function (spec) {
  if (!spec || typeof spec !== "object") return;
  const ws = Array.isArray(spec.workers) ? spec.workers : [];
  $("pair-spec-summary").textContent = visible("spec · " + (spec.pattern || "") + " · " +
    ws.map((w) => w.role + ": " + w.provider + (w.model ? " " + w.model : "")).join(" · "));
  $("pair-spec").textContent = visible(JSON.stringify(spec, null, 2));
  $("pair-spec-box").hidden = false;
};

// resumePair asks the server to continue an interrupted pair, accepting
// the named uncertain calls as failed. A refusal is shown with its code;
// an uncertain call is named, with a button to accept it once checked.
async function resumePair(accept) {
  if (!view) return;
  const v = view;
  const box = $("resume-box");
  $("resume").disabled = true;
  box.textContent = "";
  box.hidden = true;
  const body = accept && accept.length ? JSON.stringify({ accept_uncertain: accept }) : undefined;
  const { status, data } = await api("POST", "/v1/pairs/" + encodeURIComponent(v.id) + "/resume", body, body ? "application/json" : undefined);
  if (view !== v) return;
  if (status === 202) {
    v.resumed();
    return;
  }
  const e = (data && data.error) || { code: "http_" + status, message: "resume: HTTP " + status };
  box.appendChild(el("p", "error resume-refused", "Resume refused: " + (e.code || "") + (e.message ? ": " + e.message : "")));
  if (e.code === "uncertain_tool_call" && e.call) {
    const b = el("button", "accept-uncertain", "Accept call " + e.call + " as failed and resume");
    b.type = "button";
    b.addEventListener("click", () => resumePair([e.call]));
    box.appendChild(b);
  }
  box.hidden = false;
  v.fetchState();
}

// resumed follows the pair again after a resume: the stream goes on
// after the last event shown.
PairView.prototype.resumed = function () {
  // The pair.resumed block says where it stopped and went on.
  document.querySelectorAll("#timeline .interrupted-marker").forEach((n) => n.remove());
  this.ended = false;
  this.terminal = false;
  this.marked = false;
  delete document.body.dataset.streamEnded;
  $("resume").hidden = true;
  this.connect(this.last);
  this.fetchState();
  refreshPairs();
};

async function cancelPair() {
  if (!view) return;
  $("cancel").disabled = true;
  const { status, data } = await api("POST", "/v1/pairs/" + encodeURIComponent(view.id) + "/cancel");
  if (status !== 202) {
    $("pair-notice").textContent = visible((data && data.error && data.error.message) || "cancel: HTTP " + status);
  }
  view.fetchState();
}

document.addEventListener("DOMContentLoaded", () => {
  $("start-form").addEventListener("submit", startPair);
  $("example").addEventListener("change", () => {
    const v = $("example").value;
    if (v !== "") $("spec").value = examples[Number(v)].spec;
  });
  $("cancel").addEventListener("click", cancelPair);
  $("resume").addEventListener("click", () => resumePair([]));
  $("more").addEventListener("click", morePairs);
  $("filter").addEventListener("submit", (ev) => { ev.preventDefault(); resetList(); });
  let typing = 0;
  $("search").addEventListener("input", () => { clearTimeout(typing); typing = setTimeout(resetList, 250); });
  $("filter-reason").addEventListener("input", () => { clearTimeout(typing); typing = setTimeout(resetList, 250); });
  $("filter-state").addEventListener("change", resetList);
  window.addEventListener("hashchange", route);
  loadExamples();
  pollPluginDev();
  pollServerQuestions();
  refreshPairs();
  setInterval(refreshPairs, 2000);
  route();
});

// ---- the plugin under development (plugin dev --serve) ----

// pollPluginDev shows, every second, the generation of the plugin under
// development that new pairs use and why its last candidate failed. A
// server without one answers 204, and the panel stays hidden.
async function pollPluginDev() {
  const { status, data } = await api("GET", "/v1/plugin-dev");
  if (status === 204) return;
  if (status === 200 && data) showPluginDev(data);
  setTimeout(pollPluginDev, 1000);
}

// showPluginDev draws the state; the diagnostics are a compiler's output
// about the user's source, shown as text.
function showPluginDev(d) {
  const f = d.failed;
  $("plugin-dev").hidden = false;
  $("dev-plugin").textContent = visible(d.plugin || "");
  $("dev-active").textContent = visible(d.active || "none yet");
  $("dev-sha").textContent = d.active_sha256 ? "sha256 " + visible(d.active_sha256.slice(0, 12)) : "";
  $("dev-building").hidden = !d.building;
  $("dev-building").textContent = d.building ? visible(d.building) + ": building" : "";
  $("dev-failed").hidden = !f;
  $("dev-failed-head").textContent = f ? visible(f.candidate + " failed (" + f.stage + "); " + (d.active || "no generation") + " stays active") : "";
  $("dev-diagnostics").textContent = f ? visible((f.diagnostics || []).join("\n")) : "";
}

// ---- questions waiting for an answer ----

// pollQuestions asks for the pair's pending questions now and every
// second while the pair is live: a question can appear at any moment,
// also one that a restarted server brought back.
PairView.prototype.pollQuestions = function () {
  if (this.asking || view !== this) return;
  const tick = async () => {
    const { status, data } = await api("GET", "/v1/pairs/" + encodeURIComponent(this.id) + "/approvals");
    if (view !== this) return;
    if (status === 200 && data) this.showQuestions(data.approvals || []);
    const s = $("pair-state").textContent;
    if (s === "queued" || s === "running" || s === "…") this.asking = setTimeout(tick, 1000);
    else { this.asking = 0; this.showQuestions([]); }
  };
  this.asking = setTimeout(tick, 0);
};

// showQuestions draws each pending question on its worker's lane: the
// tool, its effect and replay class, its arguments as text, and Approve
// and Deny. A question drawn already keeps its node, so that a click in
// flight is not lost.
PairView.prototype.showQuestions = function (qs) {
  const keep = new Set(qs.map((q) => q.question));
  for (const i of [0, 1]) {
    const slot = $("lane-head-" + i).querySelector(".pending-question");
    for (const n of [...slot.children]) if (!keep.has(n.dataset.question)) n.remove();
  }
  for (const q of qs) {
    const slot = $("lane-head-" + this.lane(q.worker)).querySelector(".pending-question");
    if ([...slot.children].some((n) => n.dataset.question === q.question)) continue;
    slot.appendChild(this.questionNode(q));
  }
  for (const i of [0, 1]) {
    const slot = $("lane-head-" + i).querySelector(".pending-question");
    slot.hidden = slot.children.length === 0;
  }
  document.body.dataset.questions = String(qs.length);
};

PairView.prototype.questionNode = function (q) {
  const n = el("div", "question");
  n.dataset.question = q.question;
  const head = el("div", "question-head");
  head.appendChild(el("span", "question-title", "approve this call? "));
  head.appendChild(el("span", "tool-name", q.tool));
  head.appendChild(el("span", "badge" + (q.effect === "mutating" ? " mutating-badge" : ""), q.effect || "unknown effect"));
  head.appendChild(el("span", "badge", "replay " + (q.replay || "unknown")));
  n.appendChild(head);
  n.appendChild(el("div", "kv", "call " + shortID(q.call) + " · run " + shortID(q.run)));
  const args = q.arguments !== undefined ? JSON.stringify(q.arguments, null, 2)
    : (q.arguments_preview || "") + " … (" + q.arguments_bytes + " bytes in all)";
  n.appendChild(el("pre", "question-args", args));
  answerControls(n, this.id, q);
  return n;
};

// answerControls appends Approve and Deny to the question node n: each
// posts the answer, bound to the question's digest, under pairID.
function answerControls(n, pairID, q) {
  const yes = el("button", "approve", "Approve");
  const no = el("button", "deny", "Deny");
  yes.type = no.type = "button";
  const err = el("p", "error");
  const answer = async (word) => {
    yes.disabled = no.disabled = true;
    const path = "/v1/pairs/" + encodeURIComponent(pairID) + "/approvals/" +
      q.question.split("/").map(encodeURIComponent).join("/");
    const { status, data } = await api("POST", path, JSON.stringify({ answer: word, digest: q.digest }), "application/json");
    if (status === 200) {
      n.classList.add("answered");
      n.appendChild(el("div", "kv", word === "approve" ? "approved" : "denied"));
      return;
    }
    err.textContent = visible((data && data.error && data.error.message) || word + ": HTTP " + status);
    yes.disabled = no.disabled = false;
  };
  yes.addEventListener("click", () => answer("approve"));
  no.addEventListener("click", () => answer("deny"));
  n.appendChild(yes);
  n.appendChild(no);
  n.appendChild(err);
}

// ---- the server's own questions (serve --mcp) ----

// serverQuestions is the pair ID under which the server asks about
// itself: a candidate generation of the MCP servers its pairs share.
const serverQuestions = "server";

// pollServerQuestions asks for the server's pending questions now and
// every second, as pollQuestions does for a pair: a tool list can change
// at any moment. A server that asks none (no --mcp) answers 204, and the
// page stops asking.
async function pollServerQuestions() {
  const { status, data } = await api("GET", "/v1/pairs/" + serverQuestions + "/approvals");
  if (status === 204) return;
  if (status === 200 && data) showServerQuestions(data.approvals || []);
  setTimeout(pollServerQuestions, 1000);
}

// showServerQuestions draws each pending question in the side panel. A
// question drawn already keeps its node, so that a click in flight is
// not lost.
function showServerQuestions(qs) {
  const list = $("server-question-list");
  const keep = new Set(qs.map((q) => q.question));
  for (const n of [...list.children]) if (!keep.has(n.dataset.question)) n.remove();
  for (const q of qs) {
    if ([...list.children].some((n) => n.dataset.question === q.question)) continue;
    list.appendChild(serverQuestionNode(q));
  }
  $("server-questions").hidden = list.children.length === 0;
  document.body.dataset.serverQuestions = String(qs.length);
}

// serverQuestionNode shows a candidate generation of an MCP server: the
// server, whether its code is pinned, the tools it adds, drops and
// redefines (from the definitions' digests now and before), and the
// question's digest. Names come from the MCP server: shown as text.
function serverQuestionNode(q) {
  const n = el("div", "question server-question");
  n.dataset.question = q.question;
  const head = el("div", "question-head");
  head.appendChild(el("span", "question-title", "activate new tools of "));
  head.appendChild(el("span", "tool-name", q.tool));
  head.appendChild(el("span", "badge", q.effect || "unknown effect"));
  head.appendChild(el("span", "badge" + (q.replay === "UNPINNED" ? " unpinned-badge" : ""), q.replay || "unknown"));
  n.appendChild(head);
  const a = q.arguments;
  if (a && typeof a === "object" && a.tools && a.active) {
    const added = [], dropped = [], changed = [];
    for (const [name, d] of Object.entries(a.tools)) {
      if (!Object.hasOwn(a.active, name)) added.push(name);
      else if (a.active[name] !== d) changed.push(name);
    }
    for (const name of Object.keys(a.active)) if (!Object.hasOwn(a.tools, name)) dropped.push(name);
    const lines = [];
    if (added.length) lines.push("added: " + added.sort().join(", "));
    if (dropped.length) lines.push("removed: " + dropped.sort().join(", "));
    if (changed.length) lines.push("redefined: " + changed.sort().join(", "));
    lines.push(Object.keys(a.tools).length + " tool(s) after the change");
    n.appendChild(el("pre", "question-args", lines.join("\n")));
  } else {
    const args = a !== undefined ? JSON.stringify(a, null, 2)
      : (q.arguments_preview || "") + " … (" + q.arguments_bytes + " bytes in all)";
    n.appendChild(el("pre", "question-args", args));
  }
  n.appendChild(el("div", "kv", "digest " + String(q.digest || "").slice(0, 12)));
  answerControls(n, serverQuestions, q);
  return n;
}

// ---- handoff messages ----

// handoffMessage adds the message a handoff passed, expandable. The
// timeline records its size and SHA-256, not its text; the message is the
// finished run's final answer framed with the task and a heading, so the
// page rebuilds it from the recorded answer and shows it only when its
// digest is the recorded one.
PairView.prototype.handoffMessage = async function (n, p) {
  const d = el("details", "handoff-details");
  d.addEventListener("click", (ev) => ev.stopPropagation());
  const s = el("summary", null, "message");
  d.appendChild(s);
  n.appendChild(d);
  const answer = this.answers.get(p.from_run_id);
  if (answer === undefined || p.cut) {
    d.appendChild(el("div", "kv", p.cut ? "The message was cut to fit its bound; it is not shown."
      : "The answer this message framed is not in the timeline."));
    return;
  }
  if (this.task === null) await this.fetchState();
  // The default headings: a spec may name others, which the page does
  // not know; the digest tells which frame, if any, is the one.
  const tries = [];
  for (const h of ["Answer from " + p.from, "Reviewer feedback"]) {
    const body = h + ":\n" + answer;
    if (this.task) tries.push("Task:\n" + this.task + "\n\n" + body);
    tries.push(body);
  }
  for (const m of tries) {
    if (await sha256(m) === p.sha256) {
      d.dataset.verified = "true";
      s.textContent = "message · " + p.bytes + " bytes, sha256 verified";
      d.appendChild(el("pre", "handoff-message", m));
      return;
    }
  }
  d.appendChild(el("div", "kv", await sha256("") === ""
    ? "This page cannot check a digest (plain HTTP to a host that is not loopback); the answer it framed:"
    : "The message was framed with headings the page does not know; the answer it framed:"));
  d.appendChild(el("pre", "handoff-message", answer));
};

// sha256 returns the hex SHA-256 of s as UTF-8, or "" where the browser
// offers no digest (a page served to another host over plain HTTP).
async function sha256(s) {
  if (!(window.crypto && crypto.subtle)) return "";
  const buf = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(s));
  return [...new Uint8Array(buf)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

// ---- the job backend's connection ----

// The server pushes its job backend's health (GET /v1/health as a
// stream): a lost connection shows a banner until it is back. Submitting
// meanwhile gets the server's 503, shown by the start form.
document.addEventListener("DOMContentLoaded", () => {
  const banner = $("backend-banner");
  const es = new EventSource("/v1/health");
  es.addEventListener("health", (m) => {
    let d = {};
    try { d = JSON.parse(m.data); } catch (_) { return; }
    const b = d.backend || {};
    const down = b.available === false;
    const name = visible(b.name || "backend");
    banner.textContent = b.state === "closed"
      ? name + " connection closed — restart the server"
      : name + " connection lost — reconnecting";
    banner.hidden = !down;
    document.body.dataset.backend = down ? "down" : "up";
  });
});
