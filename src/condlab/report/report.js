// condlab report: the page's few interactions, inlined into every page (no library, no network).
// Each page body is a <div class="clr">; init() wires the ones not wired yet, so several bodies
// in one notebook each work on their own.
(function () {
  "use strict";
  var SVGNS = "http://www.w3.org/2000/svg";
  var COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
                "#7f7f7f", "#bcbd22", "#17becf"];

  function all(root, sel) { return Array.prototype.slice.call(root.querySelectorAll(sel)); }

  // A cell's value: data-v (full precision) where the text is rounded, else its text.
  function cellValue(td) { return td.hasAttribute("data-v") ? td.getAttribute("data-v") : td.textContent; }
  function asNumber(text) {
    if (text === null || text === undefined || String(text).trim() === "") return NaN;
    var v = Number(text);
    return isFinite(v) ? v : NaN;
  }

  // ---------------------------------------------------------------- sortable tables
  function sortTable(table, col, th) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var up = th.getAttribute("aria-sort") !== "ascending";
    all(table, "th").forEach(function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", up ? "ascending" : "descending");
    var keyed = rows.map(function (r, i) {
      var text = cellValue(r.cells[col]);
      return { row: r, num: asNumber(text), text: String(text).trim(), i: i };
    });
    keyed.sort(function (a, b) {
      var aEmpty = a.text === "", bEmpty = b.text === "";
      if (aEmpty !== bEmpty) return aEmpty ? 1 : -1;  // empty cells last, either way
      var c;
      if (!isNaN(a.num) && !isNaN(b.num)) c = a.num - b.num;
      else c = a.text.localeCompare(b.text, undefined, { numeric: true });
      return (up ? c : -c) || a.i - b.i;
    });
    keyed.forEach(function (k) { body.appendChild(k.row); });
    table.dispatchEvent(new Event("clr-change"));
  }

  function initSort(table) {
    all(table, "thead th").forEach(function (th, col) {
      th.tabIndex = 0;
      th.title = "sort by this column (click again: reverse)";
      th.addEventListener("click", function () { sortTable(table, col, th); });
      th.addEventListener("keydown", function (e) { if (e.key === "Enter") sortTable(table, col, th); });
    });
  }

  // ---------------------------------------------------------------- filters
  // Terms separated by spaces, all must match: COLUMN=VALUE, !=, >, <, >=, <= on a column,
  // or plain text anywhere in the row.
  function parseTerms(text, headers) {
    return text.trim().split(/\s+/).filter(Boolean).map(function (term) {
      var m = /^([^=<>!]+?)(!=|>=|<=|=|>|<)(.*)$/.exec(term);
      if (m && headers.indexOf(m[1]) >= 0) return { col: headers.indexOf(m[1]), op: m[2], value: m[3] };
      return { text: term.toLowerCase() };
    });
  }
  function compare(cell, op, value) {
    var a = asNumber(cell), b = asNumber(value);
    var numeric = !isNaN(a) && !isNaN(b);
    var c = numeric ? a - b : String(cell).localeCompare(value, undefined, { numeric: true });
    if (op === "=") return numeric ? c === 0 : String(cell) === value;
    if (op === "!=") return numeric ? c !== 0 : String(cell) !== value;
    if (op === ">") return c > 0;
    if (op === "<") return c < 0;
    if (op === ">=") return c >= 0;
    return c <= 0;
  }
  function applyFilter(input, table, counter) {
    var headers = all(table, "thead th").map(function (th) { return th.getAttribute("data-col") || th.textContent; });
    var terms = parseTerms(input.value, headers);
    var shown = 0, rows = Array.prototype.slice.call(table.tBodies[0].rows);
    rows.forEach(function (r) {
      var text = r.textContent.toLowerCase();
      var ok = terms.every(function (t) {
        if (t.text !== undefined) return text.indexOf(t.text) >= 0;
        var cell = r.cells[t.col];
        return cell !== undefined && compare(cellValue(cell).trim(), t.op, t.value);
      });
      r.hidden = !ok;
      if (ok) shown += 1;
    });
    if (counter) counter.textContent = shown + " of " + rows.length + " rows";
    table.dispatchEvent(new Event("clr-change"));
  }
  function initFilter(root, input) {
    var table = root.querySelector("#" + input.getAttribute("data-for"));
    var counter = root.querySelector(".clr-count[data-for='" + input.getAttribute("data-for") + "']");
    if (!table) return;
    input.addEventListener("input", function () { applyFilter(input, table, counter); });
    applyFilter(input, table, counter);
  }

  // ---------------------------------------------------------------- claim panels
  function showPanel(root, id, scroll) {
    var panel = root.querySelector("[id='" + id + "']");
    if (!panel) return;
    all(root, ".clr-panel").forEach(function (p) { p.hidden = p !== panel; });
    all(root, "tr.clr-selected").forEach(function (r) { r.classList.remove("clr-selected"); });
    all(root, ".clr-claim[data-panel='" + id + "']").forEach(function (a) {
      var row = a.closest("tr");
      if (row) row.classList.add("clr-selected");
    });
    if (scroll && panel.scrollIntoView) panel.scrollIntoView({ block: "start" });
  }
  function initClaims(root) {
    all(root, ".clr-claim").forEach(function (a) {
      a.addEventListener("click", function (e) {
        e.preventDefault();
        showPanel(root, a.getAttribute("data-panel"), true);
      });
    });
    var hash = decodeURIComponent((window.location.hash || "").slice(1));
    if (hash && root.querySelector(".clr-panel[id='" + hash + "']")) showPanel(root, hash, false);
  }

  // ---------------------------------------------------------------- epoch sliders
  function initViewer(viewer) {
    var slider = viewer.querySelector(".clr-slider");
    var label = viewer.querySelector(".clr-label");
    var frames = all(viewer, ".clr-frame");
    function show() {
      var k = Number(slider.value);
      frames.forEach(function (f, i) { f.hidden = i !== k; });
      if (label && frames[k]) label.textContent = frames[k].getAttribute("data-label");
    }
    slider.addEventListener("input", show);
    show();
  }

  // ---------------------------------------------------------------- switches (one child shown)
  function initSwitch(root, select) {
    var box = root.querySelector("#" + select.getAttribute("data-for"));
    if (!box) return;
    function show() {
      all(box, ":scope > [data-choice]").forEach(function (c) {
        c.hidden = c.getAttribute("data-choice") !== select.value;
      });
    }
    select.addEventListener("change", show);
    show();
  }

  // ---------------------------------------------------------------- plots (inline SVG)
  function el(name, attrs, parent) {
    var node = document.createElementNS(SVGNS, name);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (parent) parent.appendChild(node);
    return node;
  }
  // Ticks of an axis from lo to hi; a log axis works in log10 units: powers of ten (every k-th
  // where there are many), or, within about a decade, nice values mapped to log10.
  function niceTicks(lo, hi, log) {
    var ticks = [];
    if (log) {
      if (hi - lo < 1.5) {
        return niceTicks(Math.pow(10, lo), Math.pow(10, hi), false)
          .filter(function (v) { return v > 0; }).map(Math.log10);
      }
      var every = Math.max(1, Math.ceil((hi - lo) / 8));
      for (var e = Math.ceil(lo); e <= Math.floor(hi); e++) if (e % every === 0) ticks.push(e);
      return ticks.length ? ticks : [lo, hi];
    }
    var span = hi - lo || 1, step = Math.pow(10, Math.floor(Math.log10(span / 5)));
    [1, 2, 5, 10].some(function (f) { if (span / (step * f) <= 6) { step *= f; return true; } return false; });
    for (var t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) ticks.push(Math.abs(t) < step * 1e-9 ? 0 : t);
    return ticks;
  }
  function fmt(v) {
    if (v === 0) return "0";
    var a = Math.abs(v);
    return a >= 1e4 || a < 1e-3 ? v.toExponential(0).replace("e+", "e") : String(Number(v.toPrecision(3)));
  }
  // series: [{name, x: [], y: []}]; opts: {logx, logy, xlabel, ylabel, lines, vlines: [{x, label}],
  // hlines: [{y, label}]}. Points that a log axis cannot show (<= 0) are left out and counted.
  function drawPlot(svg, series, opts) {
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    var W = 640, H = 340, L = 64, R = 150, T = 12, B = 44;
    svg.setAttribute("viewBox", "0 0 " + W + " " + H);
    var tx = function (v) { return opts.logx ? Math.log10(v) : v; };
    var ty = function (v) { return opts.logy ? Math.log10(v) : v; };
    var dropped = 0, xs = [], ys = [];
    var clean = series.map(function (s) {
      var pts = [];
      s.x.forEach(function (x, i) {
        var y = s.y[i];
        if (x === null || y === null || !isFinite(x) || !isFinite(y)) return;
        if ((opts.logx && x <= 0) || (opts.logy && y <= 0)) { dropped += 1; return; }
        pts.push([tx(x), ty(y), x, y]);
        xs.push(tx(x)); ys.push(ty(y));
      });
      pts.sort(function (a, b) { return a[0] - b[0]; });
      return { name: s.name, pts: pts };
    });
    (opts.hlines || []).forEach(function (h) { if (!opts.logy || h.y > 0) ys.push(ty(h.y)); });
    if (!xs.length) {
      el("text", { x: W / 2, y: H / 2, "text-anchor": "middle" }, svg).textContent = "nothing to plot";
      return;
    }
    var x0 = Math.min.apply(null, xs), x1 = Math.max.apply(null, xs);
    var y0 = Math.min.apply(null, ys), y1 = Math.max.apply(null, ys);
    if (x0 === x1) { x0 -= 0.5; x1 += 0.5; }
    if (y0 === y1) { y0 -= 0.5; y1 += 0.5; }
    var padY = (y1 - y0) * 0.05; y0 -= padY; y1 += padY;
    var px = function (v) { return L + (v - x0) / (x1 - x0) * (W - L - R); };
    var py = function (v) { return H - B - (v - y0) / (y1 - y0) * (H - T - B); };
    var axes = el("g", { class: "clr-axes" }, svg);
    el("rect", { x: L, y: T, width: W - L - R, height: H - T - B, fill: "none", stroke: "#999" }, axes);
    niceTicks(x0, x1, opts.logx).forEach(function (t) {
      el("line", { x1: px(t), x2: px(t), y1: H - B, y2: H - B + 4, stroke: "#333" }, axes);
      el("text", { x: px(t), y: H - B + 16, "text-anchor": "middle" }, axes).textContent = fmt(opts.logx ? Math.pow(10, t) : t);
    });
    niceTicks(y0, y1, opts.logy).forEach(function (t) {
      el("line", { x1: L - 4, x2: L, y1: py(t), y2: py(t), stroke: "#333" }, axes);
      el("text", { x: L - 6, y: py(t) + 4, "text-anchor": "end" }, axes).textContent = fmt(opts.logy ? Math.pow(10, t) : t);
    });
    el("text", { x: L + (W - L - R) / 2, y: H - 8, "text-anchor": "middle" }, axes).textContent =
      (opts.xlabel || "") + (opts.logx ? " (log)" : "");
    var yl = el("text", { x: 14, y: T + (H - T - B) / 2, "text-anchor": "middle",
                          transform: "rotate(-90 14 " + (T + (H - T - B) / 2) + ")" }, axes);
    yl.textContent = (opts.ylabel || "") + (opts.logy ? " (log)" : "");
    (opts.vlines || []).forEach(function (v) {
      if (opts.logx && v.x <= 0) return;
      var x = px(tx(v.x));
      if (x < L || x > W - R) return;
      el("line", { x1: x, x2: x, y1: T, y2: H - B, stroke: "#555", "stroke-dasharray": "4 3" }, svg);
      el("text", { x: x + 3, y: T + 12, class: "clr-note" }, svg).textContent = v.label;
    });
    (opts.hlines || []).forEach(function (h) {
      if (opts.logy && h.y <= 0) return;
      var y = py(ty(h.y));
      el("line", { x1: L, x2: W - R, y1: y, y2: y, stroke: "#999", "stroke-dasharray": "2 3" }, svg);
      el("text", { x: W - R - 3, y: y - 3, "text-anchor": "end", class: "clr-note" }, svg).textContent = h.label;
    });
    clean.forEach(function (s, k) {
      var color = COLORS[k % COLORS.length];
      if (opts.lines !== false && s.pts.length > 1) {
        el("polyline", { points: s.pts.map(function (p) { return px(p[0]) + "," + py(p[1]); }).join(" "),
                         fill: "none", stroke: color, "stroke-width": 1.5 }, svg);
      }
      if (opts.markers !== false) {
        s.pts.forEach(function (p) {
          var c = el("circle", { cx: px(p[0]), cy: py(p[1]), r: 3, fill: color }, svg);
          el("title", {}, c).textContent = (s.name ? s.name + ": " : "") + fmt(p[2]) + ", " + fmt(p[3]);
        });
      }
      if (clean.length > 1 || s.name) {
        var y = T + 14 * k + 10;
        if (k < 20) {
          el("rect", { x: W - R + 10, y: y - 8, width: 10, height: 10, fill: color }, svg);
          el("text", { x: W - R + 24, y: y + 1, class: "clr-legend" }, svg).textContent = s.name;
        }
      }
    });
    if (clean.length > 20) {
      el("text", { x: W - R + 10, y: T + 14 * 20 + 10, class: "clr-legend" }, svg).textContent =
        "... " + (clean.length - 20) + " more";
    }
    if (dropped) {
      el("text", { x: L + 4, y: H - B - 6, class: "clr-note" }, svg).textContent =
        dropped + " point(s) <= 0 not shown on the log axis";
    }
  }

  function initChart(box) {
    var data = JSON.parse(box.querySelector("script[type='application/json']").textContent);
    drawPlot(box.querySelector("svg"), data.series, data);
  }

  // A table's column against another, one series per value of a third, over the rows shown.
  function initTablePlot(root, box) {
    var table = root.querySelector("#" + box.getAttribute("data-table"));
    var pick = function (name) { return box.querySelector("[data-role='" + name + "']"); };
    var svg = box.querySelector("svg");
    if (!table) return;
    var headers = all(table, "thead th").map(function (th) { return th.getAttribute("data-col") || th.textContent; });
    function draw() {
      var xi = headers.indexOf(pick("x").value), yi = headers.indexOf(pick("y").value);
      var gi = headers.indexOf(pick("group").value);
      var groups = {}, order = [];
      Array.prototype.slice.call(table.tBodies[0].rows).forEach(function (r) {
        if (r.hidden) return;
        var key = gi >= 0 ? pick("group").value + "=" + cellValue(r.cells[gi]).trim() : "";
        if (!(key in groups)) { groups[key] = { name: key, x: [], y: [] }; order.push(key); }
        groups[key].x.push(asNumber(cellValue(r.cells[xi])));
        groups[key].y.push(asNumber(cellValue(r.cells[yi])));
      });
      order.sort(function (a, b) { return a.localeCompare(b, undefined, { numeric: true }); });
      drawPlot(svg, order.map(function (k) { return groups[k]; }), {
        logx: pick("logx").checked, logy: pick("logy").checked, xlabel: pick("x").value,
        ylabel: pick("y").value, lines: true });
    }
    all(box, "select, input").forEach(function (c) { c.addEventListener("change", draw); });
    table.addEventListener("clr-change", draw);
    draw();
  }

  function init(root) {
    root.setAttribute("data-ready", "1");
    all(root, "table.clr-sortable").forEach(initSort);
    all(root, "input.clr-filter").forEach(function (i) { initFilter(root, i); });
    all(root, ".clr-viewer").forEach(initViewer);
    all(root, "select.clr-switch").forEach(function (s) { initSwitch(root, s); });
    all(root, ".clr-chart").forEach(initChart);
    all(root, ".clr-tableplot").forEach(function (b) { initTablePlot(root, b); });
    initClaims(root);
  }

  all(document, ".clr:not([data-ready])").forEach(init);
})();
