// timeline.html's behaviour: reads the embedded data (see data.rs for its
// layout), draws the subsecond-offset heat map of the selected threads,
// turns a drag over it into a range of slices, and draws that range's
// flamegraph with d3-flame-graph; a wall-clock capture's map is coloured by
// its on-CPU, off-CPU or wall time, switched in the page. Every name comes from the profiled
// program: it goes into the DOM only as text (textContent, Option text,
// d3's .text() and .attr()), never as markup.
(function () {
  "use strict";
  var head = JSON.parse(document.getElementById("fgbpf-head").textContent);
  var D = JSON.parse(document.getElementById("fgbpf-data").textContent);
  var SVG = "http://www.w3.org/2000/svg";
  var HIGHLIGHT = "#e600e6";
  var timed = D.slice_us !== null && D.slices > 0;
  var rows = timed ? D.rows : 1;
  var cols = timed ? Math.ceil(D.slices / rows) : 0;
  var S = D.stacks;
  var $ = function (id) { return document.getElementById(id); };
  function text(id, s) { $(id).textContent = s; }

  // Amounts as the text report says them (Unit::amount).
  function amount(n) {
    if (D.unit === "samples") return Math.round(n).toLocaleString("en-US") + " samples";
    if (n >= 1e6) return (n / 1e6).toFixed(2) + " s";
    if (n >= 1e3) return (n / 1e3).toFixed(1) + " ms";
    return Math.round(n) + " us";
  }
  function seconds(slice) { return +(slice * D.slice_us / 1e6).toFixed(6); }
  function span(from, to) { return seconds(from) + "\u2013" + seconds(to) + " s"; }

  // Span::within: the part of a span's weight in slices from..to,
  // spread evenly, rounded to the nearest unit.
  function within(first, last, w, from, to) {
    var lo = Math.max(first, from), hi = Math.min(last + 1, to);
    if (lo >= hi) return 0;
    var len = last - first + 1, overlap = hi - lo;
    if (overlap === len) return w;
    return Math.floor((w * overlap + Math.floor(len / 2)) / len);
  }

  // ---- Threads ----
  var chosen = "all";
  var on = new Uint8Array(D.threads.length);
  var onNone = true;
  function choose(value) {
    chosen = value;
    onNone = value === "all" || value === "none";
    for (var t = 0; t < D.threads.length; t++) {
      var th = D.threads[t];
      on[t] = value === "all" || value === "p:" + th[0] || value === "t:" + t ? 1 : 0;
    }
  }
  function selected(s) { return s[0] < 0 ? onNone : on[s[0]] === 1; }
  function fillThreads() {
    var weight = new Float64Array(D.threads.length), none = 0;
    for (var i = 0; i < S.length; i++) {
      if (S[i][0] < 0) none += S[i][1]; else weight[S[i][0]] += S[i][1];
    }
    var procs = new Map();
    D.threads.forEach(function (th, t) {
      var p = procs.get(th[0]);
      if (!p) { p = { pid: th[0], name: D.frames[th[th.length - 2]], weight: 0, threads: [] }; procs.set(th[0], p); }
      p.weight += weight[t];
      p.threads.push(t);
    });
    var select = $("threads");
    var total = 0;
    for (var k = 0; k < S.length; k++) total += S[k][1];
    select.add(new Option("All threads (" + amount(total) + ")", "all"));
    if (none > 0) select.add(new Option("Stacks of no thread (" + amount(none) + ")", "none"));
    Array.from(procs.values())
      .sort(function (a, b) { return b.weight - a.weight || a.pid - b.pid; })
      .forEach(function (p) {
        select.add(new Option(p.name + ", all threads (" + amount(p.weight) + ")", "p:" + p.pid));
        p.threads
          .sort(function (a, b) { return weight[b] - weight[a] || a - b; })
          .forEach(function (t) {
            select.add(new Option("\u00a0\u00a0\u00a0" + D.frames[D.threads[t][D.threads[t].length - 1]] + " (" + amount(weight[t]) + ")", "t:" + t));
          });
      });
    select.value = "all";
    select.addEventListener("change", function () { setThreads(select.value); });
  }

  // ---- What the heat map measures ----
  // A wall-clock capture's stacks are time on the CPU and time off it (an
  // off-CPU stack has a fifth element, 1): every thread's cells hold its
  // whole slice, so the map is coloured by one side (on-CPU by default),
  // or by both ("wall"). Other captures have one side: "all".
  var MEASURES = [["on", "on-CPU time"], ["off", "off-CPU time"], ["wall", "wall time (on and off CPU)"]];
  var measure = D.split ? "on" : "all";
  function counted(s) {
    if (measure === "on") return s[4] !== 1;
    if (measure === "off") return s[4] === 1;
    return true;
  }
  // The weight of the left-out stacks in slice s that the measure counts.
  function leftOut(s) {
    var all = D.left_out.per_slice.length ? D.left_out.per_slice[s] : 0;
    var off = D.left_out.per_slice_off && D.left_out.per_slice_off.length ? D.left_out.per_slice_off[s] : 0;
    if (measure === "on") return all - off;
    if (measure === "off") return off;
    return all;
  }
  function measureWords() {
    if (measure === "on") return "on-CPU time";
    if (measure === "off") return "off-CPU time";
    if (measure === "wall") return "wall time";
    return D.unit === "samples" ? "samples" : "time";
  }
  function fillMeasures() {
    if (!D.split) return;
    var select = $("measure");
    MEASURES.forEach(function (m) { select.add(new Option(m[1], m[0])); });
    select.value = measure;
    $("measure-label").hidden = false;
    select.addEventListener("change", function () { setMeasure(select.value); });
  }
  function setMeasure(value) {
    if (!D.split || !MEASURES.some(function (m) { return m[0] === value; })) return;
    measure = value;
    $("measure").value = value;
    aboutMap();
    paintMap();
  }

  // ---- Heat map ----
  var cells = [];
  var cellWeight = new Float64Array(D.slices);
  // Weight per slice of the selected stacks the measure counts: each span
  // adds its share of one slice (the same in all of its slices) from its
  // first slice on and takes it back after its last.
  function heat() {
    var change = new Float64Array(D.slices + 1);
    for (var i = 0; i < S.length; i++) {
      if (!selected(S[i]) || !counted(S[i])) continue;
      var sp = S[i][3];
      for (var j = 0; j < sp.length; j += 3) {
        var f = sp[j], l = sp[j + 1], w = sp[j + 2];
        if (f >= D.slices) continue;
        var each = within(f, l, w, f, f + 1);
        change[f] += each;
        change[Math.min(l + 1, D.slices)] -= each;
      }
    }
    var at = 0;
    for (var s = 0; s < D.slices; s++) { at += change[s]; cellWeight[s] = at; }
  }
  var cellW = 14, cellH = 14, left = 52, top = 18;
  function drawMap() {
    if (!timed) {
      text("map-about", "This profile has no time slices: only the whole capture's flamegraph can be drawn.");
      $("map").hidden = true;
      return;
    }
    var colSeconds = rows * D.slice_us / 1e6;
    aboutMap();
    var avail = Math.max(400, ($("map").clientWidth || 1000) - left - 20);
    cellW = Math.max(3, Math.min(24, Math.floor(avail / cols)));
    cellH = rows > 40 ? 6 : rows > 20 ? 10 : 14;
    var svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("width", left + cols * cellW + 10);
    svg.setAttribute("height", top + rows * cellH + 4);
    svg.id = "heatmap";
    var every = Math.max(1, Math.ceil(40 / cellW));
    for (var c = 0; c < cols; c += every) {
      var t = document.createElementNS(SVG, "text");
      t.setAttribute("x", left + c * cellW);
      t.setAttribute("y", 12);
      t.textContent = +(c * colSeconds).toFixed(3) + "s";
      svg.appendChild(t);
    }
    var everyRow = Math.max(1, Math.ceil(12 / cellH));
    for (var r = 0; r < rows; r += everyRow) {
      var rt = document.createElementNS(SVG, "text");
      rt.setAttribute("x", 2);
      rt.setAttribute("y", top + r * cellH + cellH - 3);
      rt.textContent = +(r * D.slice_us / 1000).toFixed(1) + " ms";
      svg.appendChild(rt);
    }
    for (var s = 0; s < D.slices; s++) {
      var col = Math.floor(s / rows), row = s % rows;
      var rect = document.createElementNS(SVG, "rect");
      rect.setAttribute("class", "cell");
      rect.setAttribute("x", left + col * cellW);
      rect.setAttribute("y", top + row * cellH);
      rect.setAttribute("width", cellW);
      rect.setAttribute("height", cellH);
      rect.setAttribute("data-slice", s);
      rect.setAttribute("data-col", col);
      rect.setAttribute("data-row", row);
      rect.appendChild(document.createElementNS(SVG, "title"));
      svg.appendChild(rect);
      cells.push(rect);
    }
    $("map").appendChild(svg);
    svg.addEventListener("mousedown", down);
    svg.addEventListener("mousemove", move);
    svg.addEventListener("mouseleave", function () { text("hover", ""); });
    window.addEventListener("mouseup", up);
  }
  function aboutMap() {
    if (!timed) return;
    text("map-about",
      "Each column is " + rows * D.slice_us / 1e6 + " s of the capture (" + cols + " columns); each cell is one " +
      (D.slice_us >= 1000 ? D.slice_us / 1000 + " ms" : D.slice_us + " us") +
      " slice, the first of its column at the top; its colour is the " + measureWords() +
      " in it" + (D.split ? " (the flamegraph below is always of the wall time)" : "") +
      ". Drag from one cell to another (time runs down each column, then on to the next) to draw that range's flamegraph.");
  }
  function describe(s) {
    var d = span(s, s + 1) + " (slice " + s + "): " + amount(cellWeight[s]) + (D.split ? " of " + measureWords() : "");
    var left = chosen === "all" ? leftOut(s) : 0;
    if (left > 0) d += ", and " + amount(left) + " in stacks left out";
    return d;
  }
  function paintMap() {
    if (!timed) return;
    heat();
    var max = 0;
    for (var s = 0; s < D.slices; s++) if (cellWeight[s] > max) max = cellWeight[s];
    text("legend", "White: nothing; darkest: " + amount(max) + (D.split ? " of " + measureWords() : "") +
      " in a cell. Hover over a cell for its amount.");
    for (var i = 0; i < cells.length; i++) {
      var w = cellWeight[i];
      cells[i].setAttribute("data-weight", w);
      cells[i].setAttribute("fill", w > 0 ? d3.interpolateOrRd(0.15 + 0.85 * w / max) : "#ffffff");
      cells[i].firstChild.textContent = describe(i);
    }
  }

  // ---- Range selection: a drag from one cell to another ----
  var range = { from: 0, to: timed ? D.slices : 0 };
  var dragFrom = null, dragTo = null;
  function sliceOf(e) {
    var t = e.target;
    var v = t && t.getAttribute ? t.getAttribute("data-slice") : null;
    return v === null ? null : +v;
  }
  function markSel(from, to) {
    for (var i = 0; i < cells.length; i++) {
      var inside = i >= from && i < to;
      if (cells[i].classList.contains("sel") !== inside) cells[i].classList.toggle("sel", inside);
    }
  }
  function down(e) {
    var s = sliceOf(e);
    if (s === null || e.button !== 0) return;
    e.preventDefault();
    dragFrom = dragTo = s;
    markSel(s, s + 1);
  }
  function move(e) {
    var s = sliceOf(e);
    if (s === null) return;
    text("hover", describe(s));
    if (dragFrom === null || s === dragTo) return;
    dragTo = s;
    markSel(Math.min(dragFrom, dragTo), Math.max(dragFrom, dragTo) + 1);
  }
  function up(e) {
    if (dragFrom === null) return;
    var s = sliceOf(e);
    if (s !== null) dragTo = s;
    var from = Math.min(dragFrom, dragTo), to = Math.max(dragFrom, dragTo) + 1;
    dragFrom = dragTo = null;
    select(from, to);
  }

  // ---- What the flamegraph stands on ----
  // Programs (every process of one name merged: a whole host's default),
  // processes, or processes and their threads. Stacks come in the order of
  // their thread-rooted paths (data.rs); for the others they are sorted
  // once by those paths, so that tree() still builds in one pass.
  var ROOTS = [["program", "programs"], ["process", "processes"], ["thread", "threads"]];
  var roots = D.roots || "thread";
  var orders = {};
  var NONE = [];
  function rootPath(t, mode, path) {
    var th = D.threads[t], n = th.length;
    if (n > 4) path.push(th[2]);
    if (mode === "program") path.push(D.programs[t]);
    else {
      path.push(th[n - 2]);
      if (mode === "thread") path.push(th[n - 1]);
    }
    return path;
  }
  function order(mode) {
    if (mode === "thread") return null;
    if (orders[mode]) return orders[mode];
    var heads = D.threads.map(function (th, t) { return rootPath(t, mode, []); });
    var idx = new Array(S.length);
    for (var i = 0; i < S.length; i++) idx[i] = i;
    idx.sort(function (x, y) {
      var sx = S[x], sy = S[y];
      var hx = sx[0] >= 0 ? heads[sx[0]] : NONE, hy = sy[0] >= 0 ? heads[sy[0]] : NONE;
      var fx = sx[2], fy = sy[2];
      var lx = hx.length + fx.length, ly = hy.length + fy.length, n = Math.min(lx, ly);
      for (var k = 0; k < n; k++) {
        var ex = k < hx.length ? hx[k] : fx[k - hx.length];
        var ey = k < hy.length ? hy[k] : fy[k - hy.length];
        if (ex !== ey) return ex - ey;
      }
      return lx - ly || x - y;
    });
    orders[mode] = idx;
    return idx;
  }
  function fillRoots() {
    var select = $("roots");
    ROOTS.forEach(function (r) { select.add(new Option(r[1], r[0])); });
    select.value = roots;
    select.addEventListener("change", function () { setRoots(select.value); });
  }
  function setRoots(value) {
    if (!ROOTS.some(function (r) { return r[0] === value; })) return;
    roots = value;
    $("roots").value = value;
    render();
  }

  // ---- Flamegraph ----
  // Frames narrower than this share of the range are left out of the
  // drawing, as FlameGraph's --minwidth does (0.05 px at 2,500 px): a
  // million stacks have millions of distinct paths, too many to draw.
  var MIN_SHARE = 2e-5;
  // The tree of a range, as d3-flame-graph reads it: n name, v weight
  // with the children's, c children, f frame index (-1 for the root).
  // Stacks come in the order of their paths (data.rs), so each one
  // shares a prefix with the one before and leaves every other node for
  // good: one pass, no lookups. A node is finished when a stack leaves
  // it, and dropped then if it is too narrow.
  function tree(from, to) {
    var whole = !timed || (from <= 0 && to >= D.slices);
    var weights = new Float64Array(S.length), total = 0;
    for (var i = 0; i < S.length; i++) {
      var s = S[i], w = 0;
      if (!selected(s)) continue;
      if (whole) w = s[1];
      else for (var j = 0; j < s[3].length; j += 3) w += within(s[3][j], s[3][j + 1], s[3][j + 2], from, to);
      weights[i] = w;
      total += w;
    }
    var root = { n: "all", f: -1, v: total, c: [] };
    var min = total * MIN_SHARE;
    var openFrames = [], openNodes = [];
    function close(depth) {
      while (openNodes.length > depth) {
        var node = openNodes.pop();
        openFrames.pop();
        if (node.v >= min) (openNodes.length ? openNodes[openNodes.length - 1] : root).c.push(node);
      }
    }
    var path = [];
    var ordered = order(roots);
    for (var q = 0; q < S.length; q++) {
      var k = ordered ? ordered[q] : q;
      var wk = weights[k];
      if (wk <= 0) continue;
      var st = S[k];
      path.length = 0;
      if (st[0] >= 0) rootPath(st[0], roots, path);
      for (var m = 0; m < st[2].length; m++) path.push(st[2][m]);
      var d = 0;
      while (d < openFrames.length && d < path.length && openFrames[d] === path[d]) openNodes[d++].v += wk;
      close(d);
      for (; d < path.length; d++) {
        openNodes.push({ n: D.frames[path[d]], f: path[d], v: wk, c: [] });
        openFrames.push(path[d]);
      }
    }
    close(0);
    return root;
  }
  var chart = null, current = null, searchTerm = "";
  function labelOf(d) {
    var all = current ? current.v : 0;
    return d.data.n + " (" + amount(d.data.v) + ", " + (all ? (100 * d.data.v / all).toFixed(2) : "0") + "%)";
  }
  function makeChart() {
    var width = Math.max(600, ($("chart").clientWidth || 1200));
    chart = flamegraph.default()
      .width(width)
      .cellHeight(18)
      .transitionDuration(250)
      .minFrameSize(0.5)
      .resetHeightOnZoom(true)
      .sort(true)
      .label(labelOf)
      .setColorMapper(function (d) {
        if (d.highlight) return HIGHLIGHT;
        return d.data.f >= 0 ? D.colours[d.data.f] : "#c8c8c8";
      })
      .setSearchMatch(function (d, term) { return !!term && d.data.n.indexOf(term) >= 0; })
      .setSearchHandler(function (results, sum, total) {
        text("matched", searchTerm ? "Matched: " + results.length + " frames, " + amount(sum) + " (" +
          (total ? (100 * sum / total).toFixed(2) : "0") + "% of the range)" : "");
      })
      .setDetailsElement($("details"));
  }
  function render() {
    current = tree(range.from, range.to);
    var where = timed ? (range.from <= 0 && range.to >= D.slices ? "Whole capture, " + span(0, D.slices) :
      "Range " + span(range.from, range.to) + " (slices " + range.from + "\u2013" + (range.to - 1) + ")") : "Whole capture";
    text("range", where + ": " + amount(current.v) + " in the selected threads");
    var empty = current.v <= 0;
    $("empty").hidden = !empty;
    $("chart").hidden = empty;
    text("empty", empty ? "Nothing to draw: the selected threads have no weight in this range." : "");
    if (empty) { text("matched", ""); return; }
    if (!chart) { makeChart(); d3.select("#chart").datum(current).call(chart); }
    else chart.update(current);
    if (searchTerm) chart.search(searchTerm); else text("matched", "");
  }
  function select(from, to) {
    from = Math.max(0, Math.floor(from));
    to = Math.min(D.slices, Math.ceil(to));
    if (!timed || to <= from) { from = 0; to = D.slices; }
    range = { from: from, to: to };
    markSel(from, from <= 0 && to >= D.slices ? from : to);
    render();
    return { from: from, to: to, weight: current.v };
  }
  function setThreads(value) {
    choose(value);
    $("threads").value = value;
    paintMap();
    render();
  }
  function search(term) {
    searchTerm = term || "";
    $("search").value = searchTerm;
    if (!chart || $("chart").hidden) return;
    if (searchTerm) chart.search(searchTerm); else { chart.clear(); text("matched", ""); }
  }

  // ---- Page ----
  text("title", head.title);
  document.title = head.title + " \u2013 fgbpf timeline";
  text("subtitle", head.subtitle || "");
  var total = D.total;
  text("about", (head.target ? "Target: " + head.target + ". " : "") + "Total: " + amount(total) +
    " in " + (S.length + D.left_out.stacks).toLocaleString("en-US") + " stacks" +
    (timed ? ", " + D.slices + " slices of " + D.slice_us / 1000 + " ms." : "."));
  if (D.left_out.stacks > 0) {
    $("left-out").hidden = false;
    text("left-out", "Left out to keep this page small: the " + D.left_out.stacks.toLocaleString("en-US") +
      " lightest stacks, " + amount(D.left_out.weight) + " (" + (100 * D.left_out.weight / total).toFixed(2) +
      "% of the total). The heat map and flamegraphs show the " + S.length.toLocaleString("en-US") + " heaviest.");
  }
  choose("all");
  fillThreads();
  fillMeasures();
  fillRoots();
  drawMap();
  paintMap();
  $("whole").addEventListener("click", function () { select(0, D.slices); });
  $("search").addEventListener("input", function () { search($("search").value); });
  $("clear").addEventListener("click", function () { search(""); });
  $("reset").addEventListener("click", function () { if (chart) chart.resetZoom(); });
  select(0, D.slices);

  // Hooks for tests and for scripting the page from the console.
  window.fgbpfTimeline = {
    select: select,
    whole: function () { return select(0, D.slices); },
    threads: function (value) {
      if (value !== undefined) setThreads(value);
      return Array.from($("threads").options).map(function (o) { return { value: o.value, text: o.text }; });
    },
    // The drawn frames, visible ones only: name and width in pixels.
    frames: function () {
      if ($("chart").hidden) return [];
      return Array.from(document.querySelectorAll("#chart g.frame"))
        .map(function (g) { return { name: g.getAttribute("name"), width: +g.getAttribute("width") }; })
        .filter(function (f) { return f.width > 0; });
    },
    // What the flamegraph stands on: "program", "process" or "thread".
    roots: function (value) {
      if (value !== undefined) setRoots(value);
      return roots;
    },
    // What the heat map is coloured by: "on", "off", "wall" (wall-clock
    // captures) or "all" (others).
    measure: function (value) {
      if (value !== undefined) setMeasure(value);
      return measure;
    },
    search: function (term) {
      search(term);
      return Array.from(document.querySelectorAll("#chart g.frame"))
        .filter(function (g) { return g.querySelector("rect").getAttribute("fill") === HIGHLIGHT; })
        .map(function (g) { return g.getAttribute("name"); });
    },
    state: function () {
      return { from: range.from, to: range.to, threads: chosen, measure: measure, roots: roots, weight: current ? current.v : 0,
        slices: D.slices, rows: rows, columns: cols, empty: !current || current.v <= 0 };
    },
  };
})();
