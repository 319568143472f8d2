// The warmkernel console page: a live view of the daemon's kernels, served by the daemon itself.
// Everything it shows comes from the daemon's JSON routes; it changes nothing but through the one
// POST, interrupt. Text is always set with textContent, never parsed as HTML.
"use strict";

const MAX_SCROLL_PX = 8_000_000; // browsers cap element heights; longer lists scroll proportionally
const OUTPUT_ROW_PX = 18;
const IMAGE_ROW_PX = 258; // a caption line with its image below it
const LIST_ROW_PX = 22;
const CHUNK = 256; // rows fetched at a time
const OPEN_LINES = 4; // open lines (one per stream) sit at the end and may still change

const $ = (id) => document.getElementById(id);

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function duration(seconds) {
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 120) return `${seconds.toFixed(1)} s`;
  const minutes = Math.floor(seconds / 60);
  return minutes < 120 ? `${minutes} min ${Math.round(seconds % 60)} s` : `${(minutes / 60).toFixed(1)} h`;
}

function bytes(n) {
  if (n === null || n === undefined) return "?";
  if (n < 1024) return `${n} B`;
  const units = ["KiB", "MiB", "GiB"];
  let value = n;
  let unit = "";
  for (unit of units) {
    value /= 1024;
    if (value < 1024) break;
  }
  return `${value.toFixed(1)} ${unit}`;
}

async function getJSON(url) {
  const response = await fetch(url, { credentials: "same-origin" });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    const error = body.error || { code: String(response.status), message: response.statusText };
    throw Object.assign(new Error(`${error.code}: ${error.message}`), { code: error.code });
  }
  return body;
}

// A scrolling list of `total` rows of which only the visible ones exist in the page. Rows have a
// fixed height, except "tall" rows (image captions with their image); past MAX_SCROLL_PX the
// scroll position maps proportionally onto the rows. Rows are fetched by windows, on demand.
class VirtualList {
  constructor(viewport, { rowPx, tallPx = rowPx, fetchRows, renderRow }) {
    this.viewport = viewport;
    this.spacer = viewport.querySelector(".spacer");
    this.window = viewport.querySelector(".window");
    this.rowPx = rowPx;
    this.tallPx = tallPx;
    this.fetchRows = fetchRows; // (lo, hi) => Promise<array of rows from lo>
    this.renderRow = renderRow; // (row, index) => Element
    this.total = 0;
    this.tall = []; // sorted indexes of tall rows
    this.rows = new Map();
    this.generation = 0; // bumps on reset: answers to older fetches are ignored
    this.loading = null;
    this.seq = 0;
    this.stickToEnd = false;
    this.scheduled = false;
    viewport.addEventListener("scroll", () => {
      this.stickToEnd = this.atEnd();
      this.schedule();
    });
    new ResizeObserver(() => this.schedule()).observe(viewport);
  }

  reset(total, tall = []) {
    this.generation += 1;
    this.rows.clear();
    this.loading = null;
    this.total = total;
    this.tall = tall;
    this.layout();
  }

  // New extent; rows from `invalidateFrom` on may have changed: they stay shown until fetched again.
  update(total, tall, { invalidateFrom = total } = {}) {
    for (const [index, row] of this.rows) if (index >= invalidateFrom) row.stale = true;
    const stick = this.stickToEnd;
    this.total = total;
    this.tall = tall;
    this.layout();
    if (stick) this.scrollToEnd();
  }

  invalidate() {
    for (const row of this.rows.values()) row.stale = true;
    this.loading = null;
    this.schedule();
  }

  tallBefore(index) {
    let lo = 0, hi = this.tall.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.tall[mid] < index) lo = mid + 1; else hi = mid;
    }
    return lo;
  }

  offset(index) {
    return index * this.rowPx + this.tallBefore(index) * (this.tallPx - this.rowPx);
  }

  heightOf(index) {
    const k = this.tallBefore(index);
    return k < this.tall.length && this.tall[k] === index ? this.tallPx : this.rowPx;
  }

  indexAt(px) {
    let lo = 0, hi = Math.max(this.total - 1, 0);
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.offset(mid) <= px) lo = mid; else hi = mid - 1;
    }
    return lo;
  }

  realHeight() { return this.offset(this.total); }

  layout() {
    this.spacer.style.height = `${Math.min(this.realHeight(), MAX_SCROLL_PX)}px`;
    this.schedule();
  }

  // How far down the real (unscaled) rows the top of the viewport is.
  realTop() {
    const view = this.viewport.clientHeight;
    const real = this.realHeight();
    const virtual = Math.min(real, MAX_SCROLL_PX);
    const range = virtual - view;
    if (real <= MAX_SCROLL_PX || range <= 0) return this.viewport.scrollTop;
    return (this.viewport.scrollTop / range) * (real - view);
  }

  atEnd() {
    const v = this.viewport;
    return v.scrollTop + v.clientHeight >= v.scrollHeight - 2;
  }

  scrollToEnd() {
    this.viewport.scrollTop = this.viewport.scrollHeight;
    this.stickToEnd = true;
    this.schedule();
  }

  scrollToIndex(index) {
    const view = this.viewport.clientHeight;
    const real = this.realHeight();
    const virtual = Math.min(real, MAX_SCROLL_PX);
    const target = Math.max(this.offset(index) - view / 3, 0);
    const scale = real <= MAX_SCROLL_PX || virtual <= view ? 1 : (virtual - view) / (real - view);
    this.viewport.scrollTop = target * scale;
    this.stickToEnd = this.atEnd();
    this.schedule();
  }

  schedule() {
    if (this.scheduled) return;
    this.scheduled = true;
    requestAnimationFrame(() => {
      this.scheduled = false;
      this.render();
    });
  }

  visibleRange() {
    if (!this.total) return [0, 0, 0];
    const top = this.realTop();
    const first = this.indexAt(top);
    let last = first;
    let px = this.offset(first);
    const bottom = top + this.viewport.clientHeight + this.rowPx;
    while (last < this.total && px < bottom) {
      px += this.heightOf(last);
      last += 1;
    }
    return [first, last, top];
  }

  render() {
    const [first, last, top] = this.visibleRange();
    const frag = document.createDocumentFragment();
    let missing = false;
    for (let index = first; index < last; index += 1) {
      const row = this.rows.get(index);
      if (row === undefined || row.stale) missing = true;
      const node = this.renderRow(row, index);
      node.dataset.index = String(index);
      frag.appendChild(node);
    }
    // The window sits where its first row's top is, in scroll coordinates.
    this.window.style.top = `${this.viewport.scrollTop - (top - this.offset(first))}px`;
    this.window.replaceChildren(frag);
    if (missing) this.load(first, last);
  }

  load(first, last) {
    const lo = Math.max(first - CHUNK / 4, 0);
    const hi = Math.min(Math.max(last + CHUNK / 4, lo + CHUNK), this.total);
    const key = `${this.generation}:${lo}:${hi}`;
    if (this.loading === key) return;
    this.loading = key;
    const generation = this.generation;
    const seq = ++this.seq; // an answer never replaces rows a later request brought
    this.fetchRows(lo, hi).then((rows) => {
      if (generation !== this.generation) return;
      if (this.loading === key) this.loading = null;
      if (this.rows.size > 8 * CHUNK) this.rows.clear();
      rows.forEach((row, i) => {
        const known = this.rows.get(lo + i);
        if (known === undefined || known.seq < seq) this.rows.set(lo + i, Object.assign(row, { seq }));
      });
      this.schedule();
    }).catch(() => {
      if (generation === this.generation) this.loading = null;
    });
  }
}

// -- the page's state ------------------------------------------------------------------------

const page = {
  kernels: [], // facts of every kernel, from the event stream
  kernel: null, // the selected kernel's name
  selected: null, // the selected execution's number
  followLatest: true, // select each new execution as it starts
  detail: null, // the selected execution's facts
  detailAt: 0, // when they were fetched (ms)
  highlight: null, // the output line a search result pointed at
  idleKey: null, // what the variables and the notebook were last fetched for
  idleSeq: 0, // the latest of their refreshes
  refreshing: false, // a refresh of the selected execution is in flight
  refreshAgain: false, // and another was asked for meanwhile
};

const api = (path) => `/api/kernels/${encodeURIComponent(page.kernel)}${path}`;
const kernelFacts = () => page.kernels.find((k) => k.name === page.kernel);

const executions = new VirtualList($("executions"), {
  rowPx: LIST_ROW_PX,
  fetchRows: async (lo, hi) => {
    const body = await getJSON(api(`/executions?offset=${lo}&limit=${hi - lo}`));
    return body.executions;
  },
  renderRow: (row) => {
    const node = el("div", "row");
    if (!row) return node;
    if (row.execution === page.selected) node.classList.add("selected");
    node.appendChild(el("span", "num", `[${row.execution}]`));
    node.appendChild(el("span", `state state-${row.state}`, row.state));
    node.appendChild(el("span", "muted", `${duration(row.elapsed_s).padStart(9)}  `));
    node.appendChild(el("span", "muted", row.client ? `${row.client}  ` : ""));
    node.appendChild(el("span", "first", row.first_line));
    node.title = `In [${row.execution}] · ${row.lines} lines · ${row.first_line}`;
    node.addEventListener("click", () => {
      const facts = kernelFacts();
      page.followLatest = facts !== undefined && row.execution === facts.latest;
      select(row.execution);
    });
    return node;
  },
});

const EMPHASIS = /^(\s*-*>|\S*(Error|Exception|Interrupt|Exit)\b|Traceback \(most recent call last\))/;

const output = new VirtualList($("output"), {
  rowPx: OUTPUT_ROW_PX,
  tallPx: IMAGE_ROW_PX,
  fetchRows: async (lo, hi) => {
    const body = await getJSON(api(`/executions/${page.selected}/lines?start=${lo}&stop=${hi}`));
    return body.lines;
  },
  renderRow: (line, index) => {
    const node = el("div", "line");
    node.appendChild(el("span", "ln", String(index + 1)));
    if (!line) {
      node.classList.add("pending");
      node.appendChild(el("span", "tx", "…"));
      return node;
    }
    node.classList.add(`s-${line.stream}`);
    if (line.folded) node.classList.add("folded");
    if (line.stream === "traceback" && EMPHASIS.test(line.text)) node.classList.add("emphasis");
    if (index === page.highlight) node.classList.add("highlight");
    node.appendChild(el("span", "tx", line.text));
    if (line.image !== undefined) {
      node.classList.add("image-row");
      node.style.height = `${IMAGE_ROW_PX}px`;
      const img = el("img");
      img.alt = line.text;
      img.src = api(`/executions/${page.selected}/images/${line.image}`);
      node.appendChild(img);
    }
    return node;
  },
});

function imageLines(detail) {
  return Object.keys(detail.image_lines || {}).map(Number).sort((a, b) => a - b);
}

// -- the selected execution --------------------------------------------------------------------

async function select(number) {
  page.selected = number;
  page.highlight = null;
  closeSearch();
  executions.schedule();
  const detail = await getJSON(api(`/executions/${number}`));
  if (page.selected !== number) return;
  showDetail(detail);
  output.reset(detail.line_counts.combined, imageLines(detail));
  output.scrollToEnd();
}

function showDetail(detail) {
  page.detail = detail;
  page.detailAt = Date.now();
  $("title").textContent = `In [${detail.execution}]`;
  $("state").textContent = detail.state;
  $("state").className = `state state-${detail.state}`;
  $("client").textContent = detail.client ? `sent by ${detail.client}` : "";
  $("source").textContent = detail.source;
  const notes = [...detail.notes];
  if (detail.error) notes.unshift(`${detail.error.name}: ${detail.error.value}`);
  if (detail.end_reason) notes.push(detail.end_reason);
  $("notes").textContent = notes.join(" · ");
  tick();
  // An end that came while this detail was fetched sends no further event: ask again.
  const facts = kernelFacts();
  const live = detail.state === "running" || detail.state === "awaiting_input";
  if (live && facts && facts.running !== detail.execution) setTimeout(refreshSelected, 100);
}

// Called on each event while the selected execution runs, and once when it ends.
async function refreshSelected() {
  const number = page.selected;
  if (number === null) return;
  if (page.refreshing) {
    page.refreshAgain = true;
    return;
  }
  page.refreshing = true;
  const before = page.detail;
  let detail;
  try {
    detail = await getJSON(api(`/executions/${number}`));
  } finally {
    page.refreshing = false;
  }
  if (page.refreshAgain) {
    page.refreshAgain = false;
    setTimeout(refreshSelected, 0);
  }
  if (page.selected !== number) return;
  showDetail(detail);
  const finished = before && before.state !== detail.state;
  const oldTotal = before ? before.line_counts.combined : 0;
  output.update(detail.line_counts.combined, imageLines(detail), {
    invalidateFrom: finished ? 0 : Math.max(oldTotal - OPEN_LINES, 0),
  });
}

function tick() {
  const detail = page.detail;
  if (!detail) return;
  const running = detail.state === "running" || detail.state === "awaiting_input";
  const elapsed = detail.elapsed_s + (running ? (Date.now() - page.detailAt) / 1000 : 0);
  $("elapsed").textContent = duration(elapsed);
  const [first, last] = output.visibleRange();
  const total = output.total;
  $("output-status").textContent = total
    ? `lines ${(first + 1).toLocaleString()}–${Math.min(last, total).toLocaleString()} of ${total.toLocaleString()}`
    : "no output";
}
setInterval(tick, 250);
$("output").addEventListener("scroll", tick);

// -- search ------------------------------------------------------------------------------------

function closeSearch() {
  $("search-results").hidden = true;
  $("search-close").hidden = true;
  $("search-results").replaceChildren();
}

$("search-close").addEventListener("click", closeSearch);

$("search-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const query = $("query").value;
  if (!query || page.selected === null) return;
  const context = $("context").value || "0";
  const params = new URLSearchParams({
    query,
    context_before: context,
    context_after: context,
    ignore_case: $("ignore-case").checked ? "1" : "0",
  });
  const box = $("search-results");
  box.hidden = false;
  $("search-close").hidden = false;
  box.replaceChildren(el("div", "summary", "searching…"));
  try {
    showResults(await getJSON(api(`/executions/${page.selected}/search?${params}`)));
  } catch (error) {
    box.replaceChildren(el("div", "summary error", error.message));
  }
});

function showResults(result) {
  const box = $("search-results");
  const nodes = [];
  if (result.dropped) {
    box.replaceChildren(el("div", "summary", `output of execution ${result.execution} was dropped`));
    return;
  }
  const total = result.matches_total === null ? `at least ${result.matches_shown}` : result.matches_total;
  nodes.push(el("div", "summary", `${total} matching lines (${result.mode})`));
  result.groups.forEach((group, i) => {
    if (i) nodes.push(el("div", "sep", "--"));
    for (const line of group) {
      const hit = el("div", `hit${line.match ? " match" : ""}`, `${line.match ? "M" : "C"} ${line.line} | ${line.text}`);
      hit.addEventListener("click", () => {
        page.highlight = line.line - 1;
        output.scrollToIndex(line.line - 1);
      });
      nodes.push(hit);
    }
  });
  if (result.matches_total !== null && result.matches_total > result.matches_shown) {
    nodes.push(el("div", "summary", `${result.matches_total - result.matches_shown} more matches`));
  }
  box.replaceChildren(...nodes);
}

// -- variables and notebook (fetched when the kernel is idle) ------------------------------------

async function refreshIdle(facts) {
  const seq = ++page.idleSeq; // a later refresh wins over one that answers late
  try {
    const listing = await getJSON(api("/variables"));
    if (seq === page.idleSeq) showVariables(listing);
  } catch (error) {
    if (seq !== page.idleSeq) return;
    $("variables-note").textContent = error.code === "busy" ? "(a cell runs; shown when it ends)" : "";
    if (error.code !== "busy") $("variables").replaceChildren(el("div", "error", error.message));
  }
  if (seq !== page.idleSeq) return;
  if (!facts.notebook) {
    $("notebook-name").textContent = "";
    $("notebook").replaceChildren(el("div", "muted", "no notebook is bound"));
    return;
  }
  try {
    const view = await getJSON(api("/notebook"));
    if (seq === page.idleSeq) showNotebook(view);
  } catch (error) {
    if (seq === page.idleSeq) $("notebook").replaceChildren(el("div", "error", error.message));
  }
}

function table(headers, rows) {
  const t = el("table");
  const head = el("tr");
  headers.forEach((h) => head.appendChild(el("th", "", h)));
  t.appendChild(head);
  for (const cells of rows) {
    const tr = el("tr");
    for (const cell of cells) {
      const [text, className] = Array.isArray(cell) ? cell : [cell, ""];
      tr.appendChild(el("td", className, text));
    }
    t.appendChild(tr);
  }
  return t;
}

function extent(row) {
  if (Array.isArray(row.shape)) return row.shape.join("×") || "scalar";
  return Number.isInteger(row.length) ? `len ${row.length}` : "";
}

function showVariables(listing) {
  const notes = [`${listing.total} variables`];
  if (listing.modules_hidden) notes.push(`${listing.modules_hidden} modules not listed`);
  $("variables-note").textContent = `(${notes.join(", ")})`;
  const rows = listing.variables.map((v) => [
    v.name, v.type, bytes(v.size_bytes), extent(v), v.execution === null ? "" : String(v.execution),
  ]);
  $("variables").replaceChildren(table(["name", "type", "size", "shape/len", "In"], rows));
}

function showNotebook(view) {
  if (!view.notebook) {
    $("notebook-name").textContent = "";
    $("notebook").replaceChildren(el("div", "muted", "no notebook is bound"));
    return;
  }
  $("notebook-name").textContent = view.notebook;
  const rows = view.cells.map((c) => [
    String(c.index), c.id, [c.state, `cell-${c.state}`], c.execution === null ? "" : String(c.execution),
    c.reasons.join(", "), c.defines.join(" "),
  ]);
  const plan = view.plan.length ? `plan: ${view.plan.join(", ")}` : "plan: empty; every cell is fresh";
  $("notebook").replaceChildren(table(["#", "id", "state", "In", "reasons", "defines"], rows), el("p", "plan", plan));
}

// -- kernels, and the live feed ----------------------------------------------------------------

function showKernels() {
  const nav = $("kernels");
  nav.replaceChildren(...page.kernels.map((k) => {
    const doing = k.running !== null ? `running In [${k.running}]` : k.state === "ready" ? "idle" : k.state;
    const button = el("button", k.name === page.kernel ? "selected" : "", `${k.name} · ${doing} · generation ${k.generation}`);
    button.type = "button";
    button.addEventListener("click", () => switchKernel(k.name));
    return button;
  }));
  const facts = kernelFacts();
  const interrupt = $("interrupt");
  interrupt.hidden = !facts || facts.running === null;
  if (facts && facts.running !== null) interrupt.textContent = `Interrupt In [${facts.running}]`;
  $("total").textContent = facts ? `(${facts.executions.toLocaleString()})` : "";
}

function switchKernel(name) {
  page.kernel = name;
  page.selected = null;
  page.detail = null;
  page.followLatest = true;
  page.idleKey = null;
  onKernels(page.kernels);
}

$("interrupt").addEventListener("click", async () => {
  const response = await fetch(api("/interrupt"), {
    method: "POST",
    credentials: "same-origin",
    headers: { "content-type": "application/json" },
    body: "{}",
  });
  $("interrupt").textContent = response.ok ? "interrupt sent" : `interrupt refused (${response.status})`;
});

function onKernels(kernels) {
  page.kernels = kernels;
  if (!page.kernel || !kernels.some((k) => k.name === page.kernel)) page.kernel = kernels.length ? kernels[0].name : null;
  showKernels();
  const facts = kernelFacts();
  if (!facts) return;
  // Events come only on a change (while a cell runs, at most a few a second): the visible rows
  // of the list are fetched again each time, so states and elapsed times stay current.
  executions.update(facts.executions, []);
  executions.invalidate();
  const newest = facts.running !== null ? facts.running : facts.latest;
  const live = page.detail && (page.detail.state === "running" || page.detail.state === "awaiting_input");
  if (newest !== null && (page.selected === null || (page.followLatest && newest !== page.selected))) {
    select(newest);
  } else if (live) {
    refreshSelected();
  }
  const idleKey = facts.running === null ? `${facts.generation}:${facts.latest}:${facts.state}:${facts.notebook}` : null;
  if (idleKey !== null && idleKey !== page.idleKey) {
    page.idleKey = idleKey;
    refreshIdle(facts);
  } else if (facts.running !== null) {
    $("variables-note").textContent = "(a cell runs; refreshed when it ends)";
  }
}

function connect() {
  const events = new EventSource("/events");
  events.addEventListener("kernels", (event) => {
    $("connection").textContent = "live";
    $("connection").className = "connection";
    onKernels(JSON.parse(event.data).kernels);
  });
  events.addEventListener("error", () => {
    $("connection").textContent = events.readyState === EventSource.CLOSED
      ? "disconnected: `warmkernel view` prints a new link"
      : "reconnecting…";
    $("connection").className = "connection down";
  });
}

connect();
